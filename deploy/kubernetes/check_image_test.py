#!/usr/bin/env python3
"""Tests of check_image.py: how it reads the Dockerfile's final stage, and that it reports a
package missing from that stage twice over (the library's package, and the program that no
longer runs --version). The second part needs an install tree: MISSILE_BUILD names the build
directory (the ctest gives it), LIBCUDA_STANDIN the driver test double."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_image.py")
sys.path.insert(0, HERE)
import check_image  # noqa: E402


class FinalStageTest(unittest.TestCase):
    def test_only_the_last_stage_counts(self):
        text = ("FROM debian:12 AS build\nRUN apt-get install -y cmake\n"
                "FROM debian:12-slim\n"
                "RUN apt-get update -qq \\\n && apt-get install -y -qq --no-install-recommends \\\n"
                "      liba1 libb2 \\\n      libc3 \\\n && rm -rf /var/lib/apt/lists/*\n"
                "RUN apt-get install -y libd4  # and a comment\nCOPY x /y\n"
                "RUN apt-get -y install libe5; apt-get update\n")
        self.assertEqual(check_image.final_stage_packages(text),
                         ["liba1", "libb2", "libc3", "libd4", "libe5"])

    def test_no_from_is_an_error(self):
        with self.assertRaises(ValueError):
            check_image.final_stage_packages("RUN apt-get install -y liba\n")

    def test_the_shipped_dockerfile_names_the_webhooks_libraries(self):
        with open(os.path.join(HERE, "Dockerfile"), encoding="utf-8") as f:
            packages = check_image.final_stage_packages(f.read())
        for p in ("libtomlplusplus3", "libcpp-httplib0.11", "libssl3", "libgrpc++1.51"):
            self.assertIn(p, packages)


@unittest.skipUnless(os.environ.get("MISSILE_BUILD"), "MISSILE_BUILD (a build directory) not given")
class MissingPackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.tree = os.path.join(cls.tmp.name, "install")
        check_image.install_tree(os.environ["MISSILE_BUILD"], cls.tree)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_without(self, package, *extra):
        with open(os.path.join(HERE, "Dockerfile"), encoding="utf-8") as f:
            text = f.read()
        self.assertIn(f" {package} ", text)
        dockerfile = os.path.join(self.tmp.name, "Dockerfile")
        with open(dockerfile, "w", encoding="utf-8") as f:
            f.write(text.replace(f" {package} ", " ", 1))
        standin = os.environ.get("LIBCUDA_STANDIN")
        r = subprocess.run([sys.executable, CHECKER, "--dockerfile", dockerfile, "--install-tree",
                            self.tree, *(["--libcuda-standin", standin] if standin else []),
                            *extra], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def test_toml_library_missing(self):
        rc, out = self.check_without("libtomlplusplus3")
        self.assertEqual(rc, 1, out)
        self.assertIn("usr/local/bin/missiled: libtomlplusplus.so.3 is in the package "
                      "libtomlplusplus3, which the final stage does not install", out)
        self.assertNotIn("--version fails", out)  # the programs run only once the list is right

    def test_the_run_fails_too(self):
        rc, out = self.check_without("libtomlplusplus3", "--run-anyway")
        if "SKIP running --version" in out:
            self.skipTest("cannot chroot here")
        self.assertEqual(rc, 1, out)
        self.assertIn("/usr/local/bin/missiled --version fails in the image's files", out)
        self.assertIn("libtomlplusplus.so.3: cannot open shared object file", out)
        self.assertIn("/usr/local/bin/missilectl --version: missilectl", out)

    def test_grpc_missing(self):
        rc, out = self.check_without("libgrpc++1.51")
        self.assertEqual(rc, 1, out)
        self.assertIn("usr/local/bin/missilectl: libgrpc++.so.1.51 is in the package "
                      "libgrpc++1.51", out)


if __name__ == "__main__":
    unittest.main()
