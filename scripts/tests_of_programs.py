#!/usr/bin/env python3
"""The ctest -R pattern that selects the tests run by the given programs: reads
`ctest --show-only=json-v1` on stdin, prints ^(name|...)$ of every test whose command is one of
the programs (by file name), or nothing when none is. The sanitizer builds compile only some
targets; the tests of the others (listed as <target>_NOT_BUILT) and tests run by scripts belong
to the main build (scripts/sanitize.sh, scripts/fuzz.sh).

usage: ctest --show-only=json-v1 | tests_of_programs.py PROGRAM...
"""
import json
import os
import re
import sys


def pattern(tests, programs):
    names = [t["name"] for t in tests
             if t.get("command") and os.path.basename(t["command"][0]) in programs]
    return "^(" + "|".join(re.escape(n) for n in names) + ")$" if names else ""


if __name__ == "__main__":
    print(pattern(json.load(sys.stdin)["tests"], set(sys.argv[1:])))
