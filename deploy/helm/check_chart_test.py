#!/usr/bin/env python3
"""Renders deploy/helm/missile offline (helm-render, built from deploy/helm/render: CI has no
helm) with its default values and with other value sets, parses every output document as YAML,
runs deploy/kubernetes/check_manifests.py on the output (missiled --check-config on its
missiled.toml when MISSILED names a missiled), and checks what each value set should change.
HELM_RENDER names the renderer; without it the tests are skipped (exit status 77)."""
import base64
import os
import subprocess
import sys
import tempfile
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CHART = os.path.join(HERE, "missile")
K8S = os.path.join(HERE, "..", "kubernetes")
RENDER = os.environ.get("HELM_RENDER")
NAMESPACE = "missile-system"


class ChartTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def render(self, *args):
        r = subprocess.run([RENDER, "--chart", CHART, "--out", self.out, "--namespace",
                            NAMESPACE, *args], capture_output=True, text=True)
        return r.returncode, r.stderr

    def rendered(self, *args):
        """Renders, checks the output with check_manifests.py and returns its documents."""
        rc, err = self.render(*args)
        self.assertEqual(rc, 0, err)
        docs = []
        for name in sorted(os.listdir(self.out)):
            if name.endswith(".yaml"):
                with open(os.path.join(self.out, name), encoding="utf-8") as f:
                    docs += [d for d in yaml.safe_load_all(f) if d is not None]
        check = [sys.executable, os.path.join(K8S, "check_manifests.py"), "--dir", self.out,
                 "--no-kustomization", "--namespace", NAMESPACE, "--constants",
                 os.path.join(HERE, "..", "..", "deviceplugin", "constants.h")]
        if os.environ.get("MISSILED"):
            check += ["--missiled", os.environ["MISSILED"]]
        r = subprocess.run(check, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return docs

    @staticmethod
    def find(docs, kind, suffix=""):
        return [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]

    def config(self, docs):
        return self.find(docs, "ConfigMap")[0]["data"]["missiled.toml"]

    def plugin_args(self, docs):
        pod = self.find(docs, "DaemonSet")[0]["spec"]["template"]["spec"]
        plugin = [c for c in pod["containers"] if c["name"] == "missile-device-plugin"][0]
        return plugin["command"][1:]

    def assertFails(self, message, *args):
        rc, err = self.render(*args)
        self.assertEqual(rc, 1, err)
        self.assertIn(message, err)

    def test_defaults(self):
        docs = self.rendered()
        kinds = sorted(d["kind"] for d in docs)
        self.assertEqual(kinds, ["ConfigMap", "DaemonSet", "Deployment",
                                 "MutatingWebhookConfiguration", "PodDisruptionBudget", "Secret",
                                 "Service", "Service", "ServiceAccount"])
        toml = self.config(docs)
        self.assertIn('state_file = "/var/lib/missile/policy.toml"', toml)
        self.assertIn("enabled = true", toml)
        self.assertEqual(self.plugin_args(docs), ["--ls-slots=4", "--be-slots=8",
                                                  "--ls-quota-per-slot=12%",
                                                  "--be-quota-per-slot=6%"])
        hook = self.find(docs, "MutatingWebhookConfiguration")[0]["webhooks"][0]
        self.assertEqual(hook["rules"][0]["operations"], ["CREATE"])
        self.assertEqual(hook["failurePolicy"], "Fail")
        self.assertEqual(hook["namespaceSelector"], {"matchLabels": {"missile.io/webhook": "enabled"}})
        secret = self.find(docs, "Secret")[0]
        self.assertEqual(base64.b64decode(hook["clientConfig"]["caBundle"]),
                         base64.b64decode(secret["data"]["ca.crt"]))
        container = self.find(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(container["command"][0], "/usr/local/bin/missile-webhook")
        for flag in ("--listen", "--tls-cert", "--tls-key", "--shim-dir", "--socket-dir",
                     "--socket-gid"):
            self.assertIn(flag, container["command"])
        self.assertEqual(container["command"][container["command"].index("--socket-gid") + 1],
                         "2046")

    def test_webhook_off(self):
        docs = self.rendered("--set", "webhook.enabled=false")
        self.assertEqual(self.find(docs, "MutatingWebhookConfiguration"), [])
        self.assertEqual(self.find(docs, "Deployment"), [])
        self.assertEqual(self.find(docs, "Secret"), [])

    def test_one_webhook_replica_has_no_disruption_budget(self):
        docs = self.rendered("--set", "webhook.replicas=1")
        self.assertEqual(self.find(docs, "PodDisruptionBudget"), [])
        self.assertEqual(self.find(docs, "Deployment")[0]["spec"]["replicas"], 1)

    def test_metrics_off(self):
        docs = self.rendered("--set", "metrics.enabled=false")
        self.assertEqual(self.find(docs, "Service", "-metrics"), [])
        self.assertIn("[metrics]\nenabled = false", self.config(docs))

    def test_service_monitor(self):
        docs = self.rendered("--set", "metrics.serviceMonitor.enabled=true")
        self.assertEqual(len(self.find(docs, "ServiceMonitor")), 1)

    def test_custom_quotas_from_a_values_file(self):
        values = os.path.join(self.tmp.name, "values.yaml")
        with open(values, "w", encoding="utf-8") as f:
            f.write("devicePlugin:\n  ls: {slots: 2, quotaPerSlot: '50%'}\n"
                    "classes:\n  be: {tenantQuota: '20%', classQuota: '40%'}\n"
                    "daemon:\n  extraConfig: |\n    [pcie]\n    chunk = \"4MiB\"\n")
        docs = self.rendered("-f", values, "--set", "devicePlugin.be.quotaPerSlot=4GiB")
        self.assertEqual(self.plugin_args(docs), ["--ls-slots=2", "--be-slots=8",
                                                  "--ls-quota-per-slot=50%",
                                                  "--be-quota-per-slot=4GiB"])
        self.assertIn('[classes.be]\npriority = 10\ntenant_quota = "20%"\nclass_quota = "40%"',
                      self.config(docs))
        self.assertIn('port = 9850\n\n[pcie]\nchunk = "4MiB"', self.config(docs))

    def test_a_null_in_a_values_file_deletes_the_default(self):
        values = os.path.join(self.tmp.name, "values.yaml")
        with open(values, "w", encoding="utf-8") as f:
            f.write("node:\n  tolerations: null\n")
        docs = self.rendered("-f", values)
        pod = self.find(docs, "DaemonSet")[0]["spec"]["template"]["spec"]
        self.assertNotIn("tolerations", pod)
        self.assertEqual(pod["nodeSelector"], {"missile.io/gpu": "true"})

    def test_set_without_a_value_is_refused(self):
        self.assertFails('--set "metrics.enabled": expected key=value', "--set", "metrics.enabled")

    def test_release_name_prefixes_the_objects(self):
        docs = self.rendered("--name", "gpu")
        self.assertEqual(self.find(docs, "DaemonSet")[0]["metadata"]["name"], "gpu-missile-node")

    def test_quota_over_100_percent(self):
        self.assertFails("devicePlugin.ls.quotaPerSlot: 150% is not a percentage in (0%, 100%]",
                         "--set", "devicePlugin.ls.quotaPerSlot=150%")

    def test_quota_neither_size_nor_percent(self):
        self.assertFails('devicePlugin.be.quotaPerSlot: "lots" is neither a size',
                         "--set", "devicePlugin.be.quotaPerSlot=lots")

    def test_slots_beyond_the_pool(self):
        self.assertFails("devicePlugin.ls: 5 slots of 25% are more than the GPU's pool",
                         "--set", "devicePlugin.ls.slots=5", "--set",
                         "devicePlugin.ls.quotaPerSlot=25%")

    def test_bad_class_quota(self):
        self.assertFails("classes.ls.tenantQuota: 0% is not a percentage",
                         "--set", "classes.ls.tenantQuota=0%")

    def test_existing_secret_needs_its_ca(self):
        self.assertFails("webhook.tls.caBundle (the CA of webhook.tls.existingSecret",
                         "--set", "webhook.tls.existingSecret=my-tls")

    def test_existing_secret(self):
        ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
        docs = self.rendered("--set", "webhook.tls.existingSecret=my-tls", "--set",
                             "webhook.tls.caBundle=" + ca.decode())
        self.assertEqual(self.find(docs, "Secret"), [])
        pod = self.find(docs, "Deployment")[0]["spec"]["template"]["spec"]
        self.assertEqual(pod["volumes"][0]["secret"]["secretName"], "my-tls")


if __name__ == "__main__":
    if not RENDER or not os.access(RENDER, os.X_OK):
        print("check_chart_test: SKIP: HELM_RENDER (the built helm-render) not given; "
              "scripts/install-deps.sh installs Go for it")
        sys.exit(77)
    unittest.main()
