#!/usr/bin/env python3
"""Offline checks of Missile's Kubernetes manifests (no cluster, no kubectl).

Parses every *.yaml in the manifest directories (deploy/kubernetes and its examples/ by default,
or the Helm chart's rendered output with --no-kustomization) and checks, per kind, the fields a
cluster would refuse or that would break Missile on a node:
  - apiVersion and kind are ones this set uses, with the required metadata (DNS-1123 names);
  - workloads: selector labels match the pod template, containers have names and images,
    every volumeMount names a volume, extended resources are limits (requests equal to them);
  - missile.io/* resources are the ones missile-device-plugin advertises (read from
    deviceplugin/constants.h);
  - the DaemonSet runs on selected nodes with hostPID, mounts the kubelet's device-plugin
    directory, missiled's socket directory and the shim bundle directory from the host at the
    paths of the plugin's Allocate defaults, and its containers have liveness and readiness
    probes;
  - the ConfigMap holds missiled.toml, whose socket is the one the plugin hands to tenants
    (and, with --missiled, which `missiled --check-config` accepts), whose state file is on a
    hostPath volume of missiled's (policy survives a restart of the pod), and whose metrics
    endpoint, when on, listens beyond the pod and has a Service;
  - Services and PodDisruptionBudgets select the pods of a workload of the set; Services have
    ports (named target ports are the pods' ports); Secrets' data is base64 (tls.crt and tls.key for a TLS Secret);
  - a MutatingWebhookConfiguration's webhooks have qualified names, rules, admissionReviewVersions
    with v1, sideEffects None or NoneOnDryRun and a known failurePolicy, and call a Service of
    the set on one of its ports; a caBundle is a PEM certificate;
  - a workload's serviceAccountName is a ServiceAccount of the set, and a secret volume names a
    Secret (one of the set or not: the chart may use an existing one);
  - kustomization.yaml lists every manifest file of its directory, and only existing ones.
Exit status 0 when all is well; 1 with one line per problem otherwise; 2 on bad usage.
"""
import argparse
import base64
import binascii
import grp
import os
import re
import subprocess
import sys
import tempfile
import tomllib

import yaml

API_VERSIONS = {
    "Namespace": "v1",
    "ConfigMap": "v1",
    "Secret": "v1",
    "Service": "v1",
    "ServiceAccount": "v1",
    "DaemonSet": "apps/v1",
    "Deployment": "apps/v1",
    "Job": "batch/v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1",
    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "Role": "rbac.authorization.k8s.io/v1",
    "RoleBinding": "rbac.authorization.k8s.io/v1",
    "MutatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
    "PodDisruptionBudget": "policy/v1",
    "ServiceMonitor": "monitoring.coreos.com/v1",
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"}
WORKLOADS = {"DaemonSet", "Deployment", "Job"}
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
CONSTANT = re.compile(r'inline constexpr char (k\w+)\[\] = "([^"]*)";')


def read_constants(path):
    with open(path, encoding="utf-8") as f:
        return dict(CONSTANT.findall(f.read()))


class Checker:
    def __init__(self, directories, constants, missiled, kustomization=True):
        self.dirs = directories
        self.c = constants
        self.missiled = missiled
        self.kustomization = kustomization
        self.problems = []
        self.namespaces = set()
        self.services = {}       # (namespace, name) -> Service
        self.accounts = set()    # (namespace, name) of ServiceAccounts
        self.pods = []           # (namespace, pod template) of every workload
        self.daemon_pod = None   # the DaemonSet's pod spec
        self.daemon_config = None  # (where, missiled.toml parsed)

    def fail(self, where, what):
        self.problems.append(f"{where}: {what}")

    # --- per document -----------------------------------------------------------------------
    def index(self, doc):
        """Records what other documents may refer to, before any is checked."""
        kind, meta = doc.get("kind"), doc.get("metadata") or {}
        key = (meta.get("namespace"), meta.get("name"))
        if kind == "Namespace":
            self.namespaces.add(meta.get("name"))
        elif kind == "Service":
            self.services[key] = doc
        elif kind == "ServiceAccount":
            self.accounts.add(key)
        elif kind in WORKLOADS:
            self.pods.append((key[0], (doc.get("spec") or {}).get("template") or {}))

    def check_document(self, where, doc):
        kind, api = doc.get("kind"), doc.get("apiVersion")
        if kind not in API_VERSIONS:
            self.fail(where, f"unexpected kind {kind!r}")
            return
        where = f"{where} ({kind})"
        if api != API_VERSIONS[kind]:
            self.fail(where, f"apiVersion {api!r}, expected {API_VERSIONS[kind]!r}")
        meta = doc.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str) or not DNS1123.match(name) or len(name) > 253:
            self.fail(where, f"metadata.name {name!r} is not a DNS-1123 name")
        if kind not in CLUSTER_SCOPED and not meta.get("namespace"):
            self.fail(where, "metadata.namespace is missing")
        checks = {"DaemonSet": self.check_daemonset, "ConfigMap": self.check_configmap,
                  "Service": self.check_service, "Secret": self.check_secret,
                  "MutatingWebhookConfiguration": self.check_webhook_config,
                  "ServiceMonitor": self.check_service_monitor,
                  "PodDisruptionBudget": self.check_disruption_budget}
        if kind in WORKLOADS:
            self.check_workload(where, kind, doc)
        if kind in checks:
            checks[kind](where, doc)

    def check_workload(self, where, kind, doc):
        spec = doc.get("spec") or {}
        template = spec.get("template") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        if kind != "Job":
            selector = (spec.get("selector") or {}).get("matchLabels") or {}
            if not selector:
                self.fail(where, "spec.selector.matchLabels is missing")
            for k, v in selector.items():
                if labels.get(k) != v:
                    self.fail(where, f"selector {k}={v} does not match the pod template's labels")
        pod = template.get("spec") or {}
        if kind == "Job" and pod.get("restartPolicy") not in ("Never", "OnFailure"):
            self.fail(where, "a Job's restartPolicy must be Never or OnFailure")
        containers = pod.get("containers") or []
        if not containers:
            self.fail(where, "no containers")
        volumes = {v.get("name") for v in pod.get("volumes") or []}
        account = pod.get("serviceAccountName")
        ns = (doc.get("metadata") or {}).get("namespace")
        if account and account != "default" and (ns, account) not in self.accounts:
            self.fail(where, f"serviceAccountName {account!r} is not a ServiceAccount of the set")
        for v in pod.get("volumes") or []:
            if "secret" in v and not (v["secret"] or {}).get("secretName"):
                self.fail(where, f"secret volume {v.get('name')!r} names no secretName")
        for c in containers + (pod.get("initContainers") or []):
            cwhere = f"{where} container {c.get('name')!r}"
            if not c.get("name") or not c.get("image"):
                self.fail(cwhere, "needs a name and an image")
            for m in c.get("volumeMounts") or []:
                if m.get("name") not in volumes:
                    self.fail(cwhere, f"mounts undefined volume {m.get('name')!r}")
                if not str(m.get("mountPath", "")).startswith("/"):
                    self.fail(cwhere, f"mountPath {m.get('mountPath')!r} is not absolute")
            self.check_resources(cwhere, c.get("resources") or {})

    def check_resources(self, where, resources):
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        ours = {self.c["kLsResource"], self.c["kBeResource"]}
        for name in set(limits) | set(requests):
            if not name.startswith("missile.io/"):
                continue
            if name not in ours:
                self.fail(where, f"{name} is not a resource missile-device-plugin advertises "
                          f"({', '.join(sorted(ours))})")
            if name not in limits:
                self.fail(where, f"{name} must be set in limits (an extended resource)")
            elif name in requests and requests[name] != limits[name]:
                self.fail(where, f"{name}: requests must equal limits")
            if name in limits and (not isinstance(limits[name], int) or limits[name] < 1):
                self.fail(where, f"{name}: {limits[name]!r} is not a whole number of slots")

    def check_daemonset(self, where, doc):
        pod = doc["spec"]["template"].get("spec") or {}
        self.daemon_pod = (where, pod)
        if not pod.get("nodeSelector") and not pod.get("affinity"):
            self.fail(where, "runs on every node: give it a nodeSelector for GPU nodes")
        if pod.get("hostPID") is not True:
            self.fail(where, "missiled needs hostPID: true (it watches tenants by pid)")
        host = {}
        for v in pod.get("volumes") or []:
            if "hostPath" in v:
                host[v["name"]] = v["hostPath"].get("path")
        c = self.c
        needed = {
            "kubelet device-plugin directory": c["kDefaultKubeletDir"],
            "missiled socket directory": c["kDefaultSocketDir"],
            "shim bundle directory": c["kDefaultShimHostDir"],
        }
        for what, path in needed.items():
            if path not in host.values():
                self.fail(where, f"no hostPath volume for the {what} {path}")
        containers = {x.get("name"): x for x in pod.get("containers") or []}
        plugin = next((x for n, x in containers.items() if "device-plugin" in n), None)
        daemon = containers.get("missiled")
        if plugin is None or daemon is None:
            self.fail(where, "needs a 'missiled' container and a device plugin container")
            return
        self.expect_host_mount(where, pod, plugin, c["kDefaultKubeletDir"], host)
        self.expect_host_mount(where, pod, plugin, c["kDefaultSocketDir"], host)
        self.expect_host_mount(where, pod, daemon, c["kDefaultSocketDir"], host)
        shim_writers = [x for x in (pod.get("initContainers") or []) + list(containers.values())
                        if self.mounts_host(x, c["kDefaultShimHostDir"], host)]
        if not shim_writers:
            self.fail(where, f"no container fills the shim bundle {c['kDefaultShimHostDir']}")
        for name, x in containers.items():
            for probe in ("livenessProbe", "readinessProbe"):
                if probe not in x:
                    self.fail(where, f"container {name!r} has no {probe}")
        sc = daemon.get("securityContext") or {}
        if not sc.get("privileged") and "nvidia" not in str(daemon.get("resources")):
            self.fail(where, "missiled needs privileged or device access for /dev/nvidia*")
        for arg in plugin.get("command", []) + plugin.get("args", []):
            flag, _, value = str(arg).partition("=")
            defaults = {"--kubelet-dir": c["kDefaultKubeletDir"],
                        "--shim-host-dir": c["kDefaultShimHostDir"],
                        "--socket-host-dir": c["kDefaultSocketDir"]}
            if flag in defaults and value != defaults[flag]:
                self.fail(where, f"the plugin's {flag} {value!r} differs from the mounts "
                          f"({defaults[flag]})")

    @staticmethod
    def mounts_host(container, path, host):
        for m in container.get("volumeMounts") or []:
            if host.get(m.get("name")) == path and m.get("mountPath") == path:
                return True
        return False

    def expect_host_mount(self, where, pod, container, path, host):
        if not self.mounts_host(container, path, host):
            self.fail(where, f"container {container.get('name')!r} must mount the host's {path} "
                      f"at {path}")

    def check_configmap(self, where, doc):
        data = doc.get("data") or {}
        text = data.get("missiled.toml")
        if text is None:
            if doc["metadata"].get("name") == "missiled-config":
                self.fail(where, "has no missiled.toml")
            return
        try:
            config = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            self.fail(where, f"missiled.toml does not parse: {e}")
            return
        socket = (config.get("daemon") or {}).get("socket", self.default_socket())
        if socket != self.default_socket():
            self.fail(where, f"missiled.toml's socket {socket!r} is not the one the device plugin "
                      f"gives tenants ({self.default_socket()})")
        self.daemon_config = (where, config)
        if self.missiled:
            self.check_with_missiled(where, text)

    def default_socket(self):
        return f"{self.c['kDefaultSocketDir']}/{self.c['kSocketName']}"

    def check_with_missiled(self, where, text):
        # The groups are resolved inside missiled's container, not on the machine running this
        # check: stand one that exists here in for each group the file names (a group name that
        # is not a string still reaches missiled and is refused there).
        here = grp.getgrgid(os.getgid()).gr_name
        text = re.sub(r'^(\s*(?:socket_group|admin_group)\s*=\s*)"[^"\n]+"',
                      lambda m: m.group(1) + '"' + here + '"', text, flags=re.M)
        with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
            f.write(text)
            f.flush()
            r = subprocess.run([self.missiled, "--config", f.name, "--check-config"],
                               capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            self.fail(where, "missiled --check-config refuses missiled.toml: "
                      + (r.stderr or r.stdout).strip().replace("\n", "; "))

    # --- Services, Secrets, the webhook --------------------------------------------------------
    def selected_pods(self, namespace, selector):
        return [t for ns, t in self.pods if ns == namespace and selector and all(
            ((t.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in selector.items())]

    @staticmethod
    def container_port(template, name):
        for c in (template.get("spec") or {}).get("containers") or []:
            for p in c.get("ports") or []:
                if p.get("name") == name:
                    return p.get("containerPort")
        return None

    def target_ports(self, service):
        """The container ports a Service reaches (named ports resolved; None: unresolved)."""
        meta, spec = service.get("metadata") or {}, service.get("spec") or {}
        pods = self.selected_pods(meta.get("namespace"), spec.get("selector") or {})
        out = []
        for p in spec.get("ports") or []:
            target = p.get("targetPort", p.get("port"))
            if isinstance(target, str):
                target = next((x for x in (self.container_port(t, target) for t in pods) if x),
                              None)
            out.append(target)
        return out

    def check_service(self, where, doc):
        meta, spec = doc.get("metadata") or {}, doc.get("spec") or {}
        ports = spec.get("ports") or []
        if not ports:
            self.fail(where, "spec.ports is empty")
        selector = spec.get("selector") or {}
        if not self.selected_pods(meta.get("namespace"), selector):
            self.fail(where, f"selector {selector} matches the pods of no workload of the set")
        for p, target in zip(ports, self.target_ports(doc)):
            if not isinstance(p.get("port"), int) or not 1 <= p["port"] <= 65535:
                self.fail(where, f"port {p.get('port')!r} is not a port number")
            if target is None:
                self.fail(where, f"targetPort {p.get('targetPort')!r} names no port of the pods")

    def check_secret(self, where, doc):
        data = doc.get("data") or {}
        for key, value in data.items():
            try:
                base64.b64decode(str(value), validate=True)
            except binascii.Error:
                self.fail(where, f"data.{key} is not base64")
        if doc.get("type") == "kubernetes.io/tls":
            keys = set(data) | set(doc.get("stringData") or {})
            for key in ("tls.crt", "tls.key"):
                if key not in keys:
                    self.fail(where, f"a kubernetes.io/tls Secret needs {key}")

    def check_webhook_config(self, where, doc):
        hooks = doc.get("webhooks") or []
        if not hooks:
            self.fail(where, "has no webhooks")
        for h in hooks:
            hwhere = f"{where} webhook {h.get('name')!r}"
            name = str(h.get("name"))
            if not DNS1123.match(name) or name.count(".") < 2:
                self.fail(hwhere, "the name must be qualified, at least three DNS labels")
            if "v1" not in (h.get("admissionReviewVersions") or []):
                self.fail(hwhere, "admissionReviewVersions must include v1")
            if h.get("sideEffects") not in ("None", "NoneOnDryRun"):
                self.fail(hwhere, "sideEffects must be None or NoneOnDryRun")
            if h.get("failurePolicy", "Fail") not in ("Fail", "Ignore"):
                self.fail(hwhere, f"failurePolicy {h.get('failurePolicy')!r} is not Fail or Ignore")
            rules = h.get("rules") or []
            if not rules:
                self.fail(hwhere, "has no rules")
            for r in rules:
                for field in ("operations", "apiGroups", "apiVersions", "resources"):
                    if not isinstance(r.get(field), list) or not r[field]:
                        self.fail(hwhere, f"a rule has no {field}")
            self.check_client_config(hwhere, h.get("clientConfig") or {})

    def check_client_config(self, where, client):
        if ("service" in client) == ("url" in client):
            self.fail(where, "clientConfig needs a service or a url (one of them)")
        if "caBundle" in client:
            try:
                pem = base64.b64decode(str(client["caBundle"]), validate=True)
            except binascii.Error:
                pem = b""
            if not pem.startswith(b"-----BEGIN CERTIFICATE-----"):
                self.fail(where, "caBundle is not a base64 PEM certificate")
        ref = client.get("service")
        if not ref:
            return
        service = self.services.get((ref.get("namespace"), ref.get("name")))
        if service is None:
            self.fail(where, f"calls Service {ref.get('namespace')}/{ref.get('name')}, which is "
                      f"not in the set")
        elif ref.get("port", 443) not in [p.get("port") for p in service["spec"].get("ports", [])]:
            self.fail(where, f"calls port {ref.get('port', 443)}, which the Service does not have")

    def check_service_monitor(self, where, doc):
        spec, ns = doc.get("spec") or {}, (doc.get("metadata") or {}).get("namespace")
        match = (spec.get("selector") or {}).get("matchLabels") or {}
        names = {p.get("name") for (sns, _), svc in self.services.items() if sns == ns and match
                 and all(((svc.get("metadata") or {}).get("labels") or {}).get(k) == v
                         for k, v in match.items())
                 for p in svc["spec"].get("ports") or []}
        if not names:
            self.fail(where, f"selector {match} matches no Service of the set")
        for e in spec.get("endpoints") or [{}]:
            if e.get("port") not in names:
                self.fail(where, f"endpoint port {e.get('port')!r} is not a port of the Service")

    def check_disruption_budget(self, where, doc):
        spec, ns = doc.get("spec") or {}, (doc.get("metadata") or {}).get("namespace")
        match = (spec.get("selector") or {}).get("matchLabels") or {}
        if not self.selected_pods(ns, match):
            self.fail(where, f"selector {match} matches the pods of no workload of the set")
        if ("minAvailable" in spec) == ("maxUnavailable" in spec):
            self.fail(where, "needs minAvailable or maxUnavailable (one of them)")

    # --- across documents --------------------------------------------------------------------
    def check_daemon_config(self):
        """The state file is on a host volume of missiled's; the metrics reach a Service."""
        if not self.daemon_config or not self.daemon_pod:
            return
        where, config = self.daemon_config
        pod_where, pod = self.daemon_pod
        state = (config.get("daemon") or {}).get("state_file", "")
        host = {v["name"] for v in pod.get("volumes") or [] if "hostPath" in v}
        daemon = next((c for c in pod.get("containers") or [] if c.get("name") == "missiled"), {})
        mounts = [m["mountPath"].rstrip("/") + "/" for m in daemon.get("volumeMounts") or []
                  if m.get("name") in host and "mountPath" in m]
        if not state:
            self.fail(where, "daemon.state_file is unset: policy set with missilectl is lost at "
                      "every restart of the pod")
        elif not any(state.startswith(m) for m in mounts):
            self.fail(where, f"daemon.state_file {state!r} is not on a hostPath volume of the "
                      f"missiled container ({pod_where}): it is lost with the pod")
        metrics = config.get("metrics") or {}
        if not metrics.get("enabled"):
            return
        if metrics.get("address", "127.0.0.1") in ("127.0.0.1", "::1"):
            self.fail(where, "metrics are on but listen on the pod's loopback only")
        port = metrics.get("port", 9850)
        if not any(port in self.target_ports(s) for s in self.services.values()):
            self.fail(where, f"metrics are on but no Service reaches port {port} of the pods")

    # --- the directories -------------------------------------------------------------------
    def load(self, directory):
        """(where, document) of every manifest of a directory; checks its kustomization."""
        label = os.path.basename(os.path.normpath(directory))
        files = sorted(f for f in os.listdir(directory) if f.endswith((".yaml", ".yml")))
        if self.kustomization and "kustomization.yaml" not in files:
            self.fail(label, "no kustomization.yaml")
        manifests = [f for f in files if f != "kustomization.yaml"]
        loaded = []
        for name in manifests:
            where = f"{label}/{name}"
            try:
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    docs = [d for d in yaml.safe_load_all(f) if d is not None]
            except yaml.YAMLError as e:
                self.fail(where, f"does not parse: {e}")
                continue
            if not docs:
                self.fail(where, "holds no object")
            loaded += [(f"{where}#{i}", d) for i, d in enumerate(docs)]
        if self.kustomization and "kustomization.yaml" in files:
            self.kustomizations.append((directory, label, manifests))
        return loaded

    def run(self):
        self.kustomizations, docs = [], []
        for d in self.dirs:
            docs += self.load(d)
        for where, doc in docs:
            if isinstance(doc, dict):
                self.index(doc)
            else:
                self.fail(where, "not a mapping")
        for where, doc in docs:
            if not isinstance(doc, dict):
                continue
            self.check_document(where, doc)
            ns = (doc.get("metadata") or {}).get("namespace")
            if ns and ns not in self.namespaces:
                self.fail(where, f"namespace {ns!r} is not defined by any manifest")
        self.check_daemon_config()
        for k in self.kustomizations:
            self.check_kustomization(*k)
        return self.problems

    def check_kustomization(self, directory, label, manifests):
        with open(os.path.join(directory, "kustomization.yaml"), encoding="utf-8") as f:
            k = yaml.safe_load(f) or {}
        where = f"{label}/kustomization.yaml"
        if k.get("apiVersion") != "kustomize.config.k8s.io/v1beta1" or k.get("kind") != "Kustomization":
            self.fail(where, "apiVersion/kind must be kustomize.config.k8s.io/v1beta1 Kustomization")
        listed = k.get("resources") or []
        for r in listed:
            if r not in manifests:
                self.fail(where, f"lists {r!r}, which is not a manifest here")
        for m in manifests:
            if m not in listed:
                self.fail(where, f"does not list {m}")
        if len(set(listed)) != len(listed):
            self.fail(where, "lists a file twice")
        if k.get("namespace") and k["namespace"] not in self.namespaces:
            self.fail(where, f"namespace {k['namespace']!r} is not defined by any manifest")
        for image in k.get("images") or []:
            if not image.get("name") or not (image.get("newName") or image.get("newTag")):
                self.fail(where, f"images entry {image} needs a name and a newName or newTag")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", action="append",
                        help="a manifest directory; repeat for several checked as one set "
                             "(this script's and its examples/)")
    parser.add_argument("--namespace", action="append", default=[],
                        help="a namespace made outside the set (helm install --create-namespace)")
    parser.add_argument("--no-kustomization", action="store_true",
                        help="the directories have no kustomization.yaml (rendered Helm output)")
    parser.add_argument("--constants",
                        default=os.path.join(here, "..", "..", "deviceplugin", "constants.h"),
                        help="the device plugin's constants.h")
    parser.add_argument("--missiled", help="a missiled binary to run --check-config with")
    args = parser.parse_args()
    try:
        constants = read_constants(args.constants)
    except OSError as e:
        print(f"check_manifests: cannot read {args.constants}: {e.strerror}", file=sys.stderr)
        return 2
    missing = [k for k in ("kLsResource", "kBeResource", "kDefaultKubeletDir", "kDefaultSocketDir",
                           "kSocketName", "kDefaultShimHostDir") if k not in constants]
    if missing:
        print(f"check_manifests: {args.constants} lacks {', '.join(missing)}", file=sys.stderr)
        return 2
    dirs = args.dir or [here, os.path.join(here, "examples")]
    checker = Checker(dirs, constants, args.missiled, not args.no_kustomization)
    checker.namespaces.update(args.namespace)
    problems = checker.run()
    for p in problems:
        print(f"check_manifests: {p}")
    if not problems:
        print(f"check_manifests: {', '.join(dirs)}: all manifests pass")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
