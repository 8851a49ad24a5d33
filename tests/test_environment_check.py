#!/usr/bin/env python3
"""Checks how the build's tests are registered (cmake/testing.cmake).

Every ctest test without the label gpu runs on the driver test double, which refuses to start
where /dev/nvidiactl exists unless FAKECUDA_ALLOW_WITH_GPU=1: each must have that variable in
its ENVIRONMENT, or it fails on a GPU host. A test labelled gpu runs on the real driver and must
not have it (with it, a GPU test that loaded the test double by mistake would pass on it).

usage: test_environment_check.py CTEST BUILD_DIR
Reads `CTEST -N --show-only=json-v1` in BUILD_DIR. Tests of executables not built yet
(<target>_NOT_BUILT) are skipped and counted.
"""
import json
import subprocess
import sys

WANT = "FAKECUDA_ALLOW_WITH_GPU=1"


def problems(tests):
    """(problems, checked, skipped) for ctest's json-v1 test list."""
    found, checked, skipped = [], 0, 0
    for test in tests:
        name = test["name"]
        if name.endswith("_NOT_BUILT"):
            skipped += 1
            continue
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        labels = props.get("LABELS", [])
        env = props.get("ENVIRONMENT", [])
        labels = [labels] if isinstance(labels, str) else labels
        env = [env] if isinstance(env, str) else env
        checked += 1
        if "gpu" in labels:
            if WANT in env:
                found.append(f"{name}: label gpu, but runs with {WANT}")
        elif WANT not in env:
            found.append(f"{name}: no {WANT} in ENVIRONMENT ({env or 'none'}); register it "
                         "with gtest_discover_tests or call missile_test_environment() in its "
                         "directory (cmake/testing.cmake)")
    return found, checked, skipped


def self_test():
    """The check itself finds what it is for."""
    ok = {"name": "a", "properties": [{"name": "ENVIRONMENT", "value": [WANT]}]}
    missing = {"name": "b", "properties": [{"name": "LABELS", "value": ["unit"]}]}
    gpu_with = {"name": "c", "properties": [{"name": "LABELS", "value": ["gpu"]},
                                            {"name": "ENVIRONMENT", "value": [WANT]}]}
    gpu = {"name": "d", "properties": [{"name": "LABELS", "value": ["gpu"]}]}
    found, checked, _ = problems([ok, missing, gpu_with, gpu, {"name": "x_NOT_BUILT"}])
    assert checked == 4, checked
    assert [p.split(":")[0] for p in found] == ["b", "c"], found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    self_test()
    ctest, build_dir = sys.argv[1], sys.argv[2]
    out = subprocess.run([ctest, "-N", "--show-only=json-v1"], cwd=build_dir, check=True,
                         capture_output=True, text=True).stdout
    found, checked, skipped = problems(json.loads(out)["tests"])
    print(f"checked {checked} tests, skipped {skipped} of executables not built yet")
    if checked == 0:
        sys.exit("no tests found: nothing was checked")
    for p in found[:20]:
        print("FAIL", p)
    if len(found) > 20:
        print(f"... and {len(found) - 20} more")
    if found:
        print(f"{len(found)} tests registered wrongly (a test executable built before a change "
              "to cmake/testing.cmake keeps its old list until it is built again)")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
