#!/usr/bin/env python3
"""Offline checks of Missile's Kubernetes manifests (no cluster, no kubectl).

Parses every *.yaml in the manifest directory and checks, per kind, the fields a cluster would
refuse or that would break Missile on a node:
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
    (and, with --missiled, which `missiled --check-config` accepts);
  - kustomization.yaml lists every manifest file, and only existing ones.
Exit status 0 when all is well; 1 with one line per problem otherwise; 2 on bad usage.
"""
import argparse
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
    "ServiceAccount": "v1",
    "DaemonSet": "apps/v1",
    "Deployment": "apps/v1",
    "Job": "batch/v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1",
    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "Role": "rbac.authorization.k8s.io/v1",
    "RoleBinding": "rbac.authorization.k8s.io/v1",
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
WORKLOADS = {"DaemonSet", "Deployment", "Job"}
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
CONSTANT = re.compile(r'inline constexpr char (k\w+)\[\] = "([^"]*)";')


def read_constants(path):
    with open(path, encoding="utf-8") as f:
        return dict(CONSTANT.findall(f.read()))


class Checker:
    def __init__(self, directory, constants, missiled):
        self.dir = directory
        self.c = constants
        self.missiled = missiled
        self.problems = []
        self.namespaces = set()

    def fail(self, where, what):
        self.problems.append(f"{where}: {what}")

    # --- per document -----------------------------------------------------------------------
    def check_document(self, where, doc):
        if not isinstance(doc, dict):
            self.fail(where, "not a mapping")
            return
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
        if kind == "Namespace":
            self.namespaces.add(name)
        elif kind not in CLUSTER_SCOPED and not meta.get("namespace"):
            self.fail(where, "metadata.namespace is missing")
        if kind in WORKLOADS:
            self.check_workload(where, kind, doc)
        if kind == "DaemonSet":
            self.check_daemonset(where, doc)
        if kind == "ConfigMap":
            self.check_configmap(where, doc)
        return meta.get("namespace")

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
        if doc["metadata"].get("name") != "missiled-config":
            return
        text = data.get("missiled.toml")
        if text is None:
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

    # --- the directory ----------------------------------------------------------------------
    def run(self):
        files = sorted(f for f in os.listdir(self.dir) if f.endswith((".yaml", ".yml")))
        if "kustomization.yaml" not in files:
            self.fail(self.dir, "no kustomization.yaml")
        manifests = [f for f in files if f != "kustomization.yaml"]
        used_namespaces = {}
        for name in manifests:
            try:
                with open(os.path.join(self.dir, name), encoding="utf-8") as f:
                    docs = [d for d in yaml.safe_load_all(f) if d is not None]
            except yaml.YAMLError as e:
                self.fail(name, f"does not parse: {e}")
                continue
            if not docs:
                self.fail(name, "holds no object")
            for i, doc in enumerate(docs):
                ns = self.check_document(f"{name}#{i}", doc)
                if ns:
                    used_namespaces[f"{name}#{i}"] = ns
        for where, ns in used_namespaces.items():
            if ns not in self.namespaces:
                self.fail(where, f"namespace {ns!r} is not defined by any manifest")
        if "kustomization.yaml" in files:
            self.check_kustomization(manifests)
        return self.problems

    def check_kustomization(self, manifests):
        with open(os.path.join(self.dir, "kustomization.yaml"), encoding="utf-8") as f:
            k = yaml.safe_load(f) or {}
        where = "kustomization.yaml"
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


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=here, help="manifest directory (this script's)")
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
    problems = Checker(args.dir, constants, args.missiled).run()
    for p in problems:
        print(f"check_manifests: {p}")
    if not problems:
        print(f"check_manifests: {args.dir}: all manifests pass")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
