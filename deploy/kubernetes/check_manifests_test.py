#!/usr/bin/env python3
"""Tests of check_manifests.py: the manifests here pass, and each kind of mistake it is meant to
catch, made in a copy of them, is reported."""
import base64
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_manifests.py")
CONSTANTS = os.path.join(HERE, "..", "..", "deviceplugin", "constants.h")


WEBHOOK = """\
apiVersion: v1
kind: ServiceAccount
metadata: {name: hook, namespace: missile-system}
---
apiVersion: v1
kind: Secret
metadata: {name: hook-tls, namespace: missile-system}
type: kubernetes.io/tls
data: {tls.crt: %(ca)s, tls.key: %(ca)s}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: hook, namespace: missile-system}
spec:
  selector: {matchLabels: {app: hook}}
  template:
    metadata: {labels: {app: hook}}
    spec:
      serviceAccountName: hook
      containers:
        - name: hook
          image: registry.example.com/missile:0.1.0
          ports: [{name: https, containerPort: 8443}]
          volumeMounts: [{name: tls, mountPath: /etc/missile/tls}]
      volumes: [{name: tls, secret: {secretName: hook-tls}}]
---
apiVersion: v1
kind: Service
metadata: {name: hook, namespace: missile-system}
spec:
  selector: {app: hook}
  ports: [{port: 443, targetPort: https}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: hook}
webhooks:
  - name: pods.missile.io
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Ignore
    clientConfig:
      service: {name: hook, namespace: missile-system, path: /mutate, port: 443}
      caBundle: %(ca)s
    rules:
      - {operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}
""" % {"ca": base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
       .decode()}


class CheckManifestsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        for sub in ("", "examples"):
            os.makedirs(os.path.join(self.tmp, "kubernetes", sub), exist_ok=True)
            for name in os.listdir(os.path.join(HERE, sub)):
                if name.endswith(".yaml"):
                    shutil.copy(os.path.join(HERE, sub, name),
                                os.path.join(self.tmp, "kubernetes", sub))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def check(self, *extra):
        node = os.path.join(self.tmp, "kubernetes")
        r = subprocess.run([sys.executable, CHECKER, "--dir", node, "--dir",
                            os.path.join(node, "examples"), "--constants", CONSTANTS, *extra],
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def edit(self, name, old, new):
        path = os.path.join(self.tmp, "kubernetes", name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        self.assertIn(old, text)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new, 1))

    def add_webhook(self, old="", new=""):
        """The webhook's objects as the Helm chart makes them, with one edit."""
        with open(os.path.join(self.tmp, "kubernetes", "webhook.yaml"), "w",
                  encoding="utf-8") as f:
            self.assertIn(old, WEBHOOK)
            f.write(WEBHOOK.replace(old, new, 1))
        self.edit("kustomization.yaml", "  - metrics-service.yaml\n",
                  "  - metrics-service.yaml\n  - webhook.yaml\n")

    def assertReports(self, message):
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn(message, out)

    def test_the_manifests_pass(self):
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_unknown_resource_name(self):
        self.edit("examples/be-job.yaml", "missile.io/be: 1", "missile.io/best-effort: 1")
        self.assertReports("missile.io/best-effort is not a resource missile-device-plugin")

    def test_extended_resource_only_in_requests(self):
        self.edit("examples/ls-deployment.yaml", "limits:", "requests:")
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
        self.edit("examples/kustomization.yaml", "  - be-job.yaml\n", "  - missing.yaml\n")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("examples/kustomization.yaml: does not list be-job.yaml", out)
        self.assertIn("lists 'missing.yaml'", out)

    def test_unparsable_yaml(self):
        self.edit("namespace.yaml", "kind: Namespace", "kind: [Namespace")
        self.assertReports("does not parse")

    def test_plugin_flag_disagrees_with_the_mounts(self):
        self.edit("daemonset.yaml", "- --ls-slots=4", "- --kubelet-dir=/var/lib/other")
        self.assertReports("the plugin's --kubelet-dir '/var/lib/other' differs")

    def test_state_file_unset(self):
        self.edit("configmap.yaml", 'state_file = "/var/lib/missile/policy.toml"', 'state_file = ""')
        self.assertReports("daemon.state_file is unset: policy set with missilectl is lost")

    def test_state_file_not_on_a_host_volume(self):
        self.edit("configmap.yaml", 'state_file = "/var/lib/missile/policy.toml"',
                  'state_file = "/tmp/policy.toml"')
        self.assertReports("daemon.state_file '/tmp/policy.toml' is not on a hostPath volume")

    def test_metrics_on_loopback(self):
        self.edit("configmap.yaml", 'address = "0.0.0.0"', 'address = "127.0.0.1"')
        self.assertReports("metrics are on but listen on the pod's loopback only")

    def test_metrics_without_a_service(self):
        self.edit("metrics-service.yaml", "targetPort: metrics", "targetPort: metrix")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("targetPort 'metrix' names no port of the pods", out)
        self.assertIn("metrics are on but no Service reaches port 9850", out)

    def test_service_selects_nothing(self):
        self.edit("metrics-service.yaml", "selector:\n    app.kubernetes.io/name: missile-node",
                  "selector:\n    app.kubernetes.io/name: missile-nod")
        self.assertReports("matches the pods of no workload of the set")

    def test_kustomization_image_without_a_new_name(self):
        self.edit("examples/kustomization.yaml",
                  "    newName: registry.example.com/be-batch\n    newTag: latest\n", "")
        self.assertReports("needs a name and a newName or newTag")

    def test_the_webhook_objects_pass(self):
        self.add_webhook()
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_webhook_side_effects(self):
        self.add_webhook("sideEffects: None", "sideEffects: Some")
        self.assertReports("sideEffects must be None or NoneOnDryRun")

    def test_webhook_review_versions(self):
        self.add_webhook("admissionReviewVersions: [v1]", "admissionReviewVersions: [v1beta1]")
        self.assertReports("admissionReviewVersions must include v1")

    def test_webhook_unqualified_name(self):
        self.add_webhook("name: pods.missile.io", "name: pods")
        self.assertReports("the name must be qualified")

    def test_webhook_calls_a_port_the_service_lacks(self):
        self.add_webhook("path: /mutate, port: 443", "path: /mutate, port: 8443")
        self.assertReports("calls port 8443, which the Service does not have")

    def test_webhook_calls_a_missing_service(self):
        self.add_webhook("service: {name: hook,", "service: {name: hooks,")
        self.assertReports("calls Service missile-system/hooks, which is not in the set")

    def test_webhook_ca_bundle_not_pem(self):
        self.add_webhook("caBundle: %(ca)s" % {"ca": WEBHOOK.split("caBundle: ")[1].split()[0]},
                         "caBundle: bm90IGEgY2VydA==")
        self.assertReports("caBundle is not a base64 PEM certificate")

    def test_webhook_rule_without_operations(self):
        self.add_webhook("operations: [CREATE], ", "")
        self.assertReports("a rule has no operations")

    def test_tls_secret_without_a_key(self):
        self.add_webhook(", tls.key: ", ", tls.keys: ")
        self.assertReports("a kubernetes.io/tls Secret needs tls.key")

    def test_disruption_budget_selects_nothing(self):
        self.add_webhook("", "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\n"
                         "metadata: {name: hook, namespace: missile-system}\n"
                         "spec: {minAvailable: 1, selector: {matchLabels: {app: hooks}}}\n---\n")
        self.assertReports("(PodDisruptionBudget): selector {'app': 'hooks'} matches the pods")

    def test_missing_service_account(self):
        self.add_webhook("serviceAccountName: hook", "serviceAccountName: hooker")
        self.assertReports("serviceAccountName 'hooker' is not a ServiceAccount of the set")

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
