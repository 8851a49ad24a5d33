#!/usr/bin/env python3
"""Checks every C++ source of a configured clang build directory with -fsyntax-only, in
parallel, using its compile_commands.json: the lock annotations (-Wthread-safety, an error)
are a static check, so nothing needs to be generated or linked. The build's generated sources
(protobuf, embedded PTX) are built first with ninja. Prints each failing source's diagnostics
and exits 1 if any failed.
Usage: tsa_check.py BUILD_DIR [JOBS]"""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys


def generated_sources(build_dir):
    """The custom-command outputs the sources include or compile (relative paths)."""
    out = subprocess.run(["ninja", "-C", build_dir, "-t", "targets", "all"], check=True,
                         capture_output=True, text=True).stdout
    wanted = []
    for line in out.splitlines():
        path, _, rule = line.partition(": ")
        if rule.strip() == "CUSTOM_COMMAND" and not os.path.isabs(path) and \
                re.search(r"\.(h|cc|inc|ptx)$", path):
            wanted.append(path)
    return sorted(set(wanted))


def check(entry):
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    # Drop the output (-o FILE) and the dependency file options: nothing is written.
    kept, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-MD", "-MMD"):
            continue
        kept.append(a)
    r = subprocess.run(kept + ["-fsyntax-only"], cwd=entry["directory"], capture_output=True,
                       text=True)
    return entry["file"], r.returncode, r.stdout + r.stderr


def main():
    build_dir = sys.argv[1]
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else os.cpu_count() or 1
    gen = generated_sources(build_dir)
    if gen:
        subprocess.run(["ninja", "-C", build_dir, "-j", str(jobs)] + gen, check=True,
                       stdout=subprocess.DEVNULL)
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        entries = [e for e in json.load(f) if re.search(r"\.(cc|cpp)$", e["file"])]
    if not entries:
        print("tsa_check: no C++ sources in compile_commands.json", file=sys.stderr)
        return 1
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for path, rc, text in pool.map(check, entries):
            if rc != 0:
                failed += 1
                print(f"tsa_check: {path}:\n{text}", file=sys.stderr)
    print(f"tsa_check: {len(entries)} sources, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
