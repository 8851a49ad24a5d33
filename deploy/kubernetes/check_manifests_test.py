#!/usr/bin/env python3
"""Tests of check_manifests.py: the manifests here pass, and each kind of mistake it is meant to
catch, made in a copy of them, is reported."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_manifests.py")
CONSTANTS = os.path.join(HERE, "..", "..", "deviceplugin", "constants.h")


class CheckManifestsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        for name in os.listdir(HERE):
            if name.endswith(".yaml"):
                shutil.copy(os.path.join(HERE, name), self.tmp)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def check(self, *extra):
        r = subprocess.run([sys.executable, CHECKER, "--dir", self.tmp, "--constants", CONSTANTS,
                            *extra], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def edit(self, name, old, new):
        path = os.path.join(self.tmp, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        self.assertIn(old, text)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new, 1))

    def assertReports(self, message):
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn(message, out)

    def test_the_manifests_pass(self):
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_unknown_resource_name(self):
        self.edit("example-be-job.yaml", "missile.io/be: 1", "missile.io/best-effort: 1")
        self.assertReports("missile.io/best-effort is not a resource missile-device-plugin")

    def test_extended_resource_only_in_requests(self):
        self.edit("example-ls-deployment.yaml", "limits:", "requests:")
        self.assertReports("missile.io/ls must be set in limits")

    def test_wrong_api_version(self):
        self.edit("daemonset.yaml", "apiVersion: apps/v1", "apiVersion: extensions/v1beta1")
        self.assertReports("apiVersion 'extensions/v1beta1', expected 'apps/v1'")

    def test_plugin_without_the_kubelet_directory(self):
        self.edit("daemonset.yaml", "- name: device-plugins\n              mountPath",
                  "- name: device-plugins\n              mountPath: /elsewhere\n              x")
        self.assertReports("must mount the host's /var/lib/kubelet/device-plugins")

    def test_socket_path_differs_from_the_plugins(self):
        self.edit("configmap.yaml", 'socket = "/run/missile/missiled.sock"',
                  'socket = "/run/other.sock"')
        self.assertReports("is not the one the device plugin gives tenants")

    def test_missing_probe(self):
        self.edit("daemonset.yaml", "readinessProbe:", "startupProbe:")
        self.assertReports("has no readinessProbe")

    def test_undefined_volume(self):
        self.edit("daemonset.yaml", "- name: state\n              mountPath",
                  "- name: nowhere\n              mountPath")
        self.assertReports("mounts undefined volume 'nowhere'")

    def test_kustomization_must_list_every_file(self):
        self.edit("kustomization.yaml", "  - example-be-job.yaml\n", "  - missing.yaml\n")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("does not list example-be-job.yaml", out)
        self.assertIn("lists 'missing.yaml'", out)

    def test_unparsable_yaml(self):
        self.edit("namespace.yaml", "kind: Namespace", "kind: [Namespace")
        self.assertReports("does not parse")

    def test_plugin_flag_disagrees_with_the_mounts(self):
        self.edit("daemonset.yaml", "- --ls-slots=4", "- --kubelet-dir=/var/lib/other")
        self.assertReports("the plugin's --kubelet-dir '/var/lib/other' differs")

    @unittest.skipUnless(os.environ.get("MISSILED"), "MISSILED (a missiled binary) not given")
    def test_missiled_refuses_a_config_it_would_not_start_with(self):
        self.edit("configmap.yaml", 'socket_mode = "0660"', 'socket_mode = "0666"')
        rc, out = self.check("--missiled", os.environ["MISSILED"])
        self.assertEqual(rc, 1, out)
        self.assertIn("missiled --check-config refuses missiled.toml", out)
        self.assertIn("daemon.socket_mode", out)

    @unittest.skipUnless(os.environ.get("MISSILED"), "MISSILED (a missiled binary) not given")
    def test_groups_are_the_containers_not_this_machines(self):
        # The socket group exists in missiled's container; the machine running the check need
        # not have it (a fresh CI machine has no group "missile").
        self.edit("configmap.yaml", 'socket_group = "missile"', 'socket_group = "no-such-group-x"')
        rc, out = self.check("--missiled", os.environ["MISSILED"])
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main()
