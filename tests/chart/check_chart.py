#!/usr/bin/env python3
"""Checks charts/granary with the official Helm binary, as `helm install` would see it.

1. `helm lint --strict` passes with the default values and with every file under
   tests/chart/options/ (each turns on documented options).
2. `helm template` renders, for each of those, only kinds and API versions a cluster knows
   (plus prometheus-operator's, when monitoring is on), every namespaced object in the release's
   namespace, every object labelled as part of granary.
3. The CRDs under charts/granary/crds/ are byte for byte those of crds/, and the default ports
   and the scheduler's name in values.yaml are the constants of common/names.h.
4. Every file under tests/chart/bad-values/ fails `helm template` with the message its
   `# expect:` lines give (values.schema.json, or the chart's own checks).
5. The workloads agree with the binaries: every flag a container passes to a granary binary is
   one that binary's --help lists; the cache node's options file and the DaemonSet agree on ports,
   probes, the CSI socket and its registration, the mount keeper's socket, the state, cache and
   kubelet directories (with Bidirectional propagation where mounts must reach the host),
   /dev/fuse and the token; the CSIDriver is what the CSI plugin needs.
6. file:// sources may read no node directory by default (fileOriginRoots is empty), and each
   root that is set is the node's own directory, mounted read-only.
7. No NetworkPolicy by default; with networkPolicy.enabled, one per networkPolicy.namespaces
   selecting the rendezvous stores (common/names.h's label) on exactly the stores' two ports
   (common/api/training_job.h), open to the namespace's pods and granary-operator's.

Prints one line per check and "N passed, N failed" at the end; exits 1 on any failure.
"""
import argparse
import filecmp
import glob
import json
import os
import posixpath
import re
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
NAMESPACE = "granary-system"

# The kinds the chart may render, with their API versions.
KNOWN_KINDS = {
    ("v1", "ServiceAccount"), ("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "Service"),
    ("apps/v1", "Deployment"), ("apps/v1", "DaemonSet"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("storage.k8s.io/v1", "CSIDriver"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PodMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "CSIDriver"}


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, problems):
        problems = [p for p in problems if p]
        if problems:
            self.failed += 1
            print(f"FAIL {name}")
            for p in problems:
                print(f"     {p}")
        else:
            self.passed += 1
            print(f"ok   {name}")


def helm(args, helm_binary, chart):
    return subprocess.run([helm_binary, *args, chart], capture_output=True, text=True)


def render(helm_binary, chart, values_file=None):
    args = ["template", "granary", "--namespace", NAMESPACE]
    if values_file:
        args += ["-f", values_file]
    result = helm(args, helm_binary, chart)
    if result.returncode != 0:
        return None, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d], ""


def objects_problems(objects):
    problems = []
    for o in objects:
        kind, version = o.get("kind"), o.get("apiVersion")
        name = f"{kind}/{o.get('metadata', {}).get('name')}"
        if (version, kind) not in KNOWN_KINDS:
            problems.append(f"{name}: unknown kind or API version {version}")
        ns = o.get("metadata", {}).get("namespace")
        if kind in CLUSTER_SCOPED and ns:
            problems.append(f"{name}: cluster-scoped but has namespace {ns}")
        # RoleBindings and the rendezvous stores' NetworkPolicies go to the namespaces named.
        if kind not in CLUSTER_SCOPED and kind not in ("RoleBinding", "NetworkPolicy") \
                and ns != NAMESPACE:
            problems.append(f"{name}: namespace {ns!r}, expected the release's {NAMESPACE}")
        labels = o.get("metadata", {}).get("labels", {})
        if labels.get("app.kubernetes.io/part-of") != "granary":
            problems.append(f"{name}: not labelled app.kubernetes.io/part-of=granary")
    return problems


def network_policy_problems(root, objects, values):
    names = open(os.path.join(root, "common", "names.h")).read()
    label = re.search(r'kRendezvousLabel = "([^"]+)"', names).group(1)
    job = open(os.path.join(root, "common", "api", "training_job.h")).read()
    ports = sorted(int(re.search(rf"{n} = (\d+);", job).group(1))
                   for n in ("kRendezvousPort", "kRendezvousNoticePort"))
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    settings = values.get("networkPolicy") or {}
    wanted = sorted(settings.get("namespaces") or []) if settings.get("enabled") else []
    problems = []
    if sorted(p["metadata"]["namespace"] for p in policies) != wanted:
        problems.append(f"NetworkPolicies in {[p['metadata']['namespace'] for p in policies]}, "
                        f"expected one in each of {wanted}")
    for p in policies:
        spec = p["spec"]
        where = f"NetworkPolicy in {p['metadata']['namespace']}"
        if spec.get("podSelector") != {"matchExpressions": [{"key": label, "operator": "Exists"}]}:
            problems.append(f"{where} does not select the stores ({label}): {spec.get('podSelector')}")
        rules = spec.get("ingress") or []
        if len(rules) != 1 or sorted(x["port"] for x in rules[0].get("ports", [])) != ports:
            problems.append(f"{where}: ingress is not one rule on the ports {ports}")
            continue
        sources = rules[0].get("from", [])
        if {"podSelector": {}} not in sources:
            problems.append(f"{where} does not let the namespace's own pods in")
        operator = [f for f in sources if "namespaceSelector" in f]
        if not operator or operator[0]["namespaceSelector"] != {
                "matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}} or \
                operator[0]["podSelector"]["matchLabels"].get("app.kubernetes.io/name") != \
                "granary-operator":
            problems.append(f"{where} does not let granary-operator in: {operator}")
    return problems


def find(objects, kind, name):
    for o in objects:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    return None


def flags_of(args):
    return {a.split("=", 1)[0] for a in args if a.startswith("--")}


def help_flags(path):
    out = subprocess.run([path, "--help"], capture_output=True, text=True)
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", out.stdout + out.stderr))


def flag_problems(objects, binaries):
    problems = []
    known = {os.path.basename(b): help_flags(b) for b in binaries}
    for o in objects:
        if o["kind"] not in ("Deployment", "DaemonSet"):
            continue
        for c in o["spec"]["template"]["spec"]["containers"]:
            binary = os.path.basename((c.get("command") or [""])[0])
            if c["name"] == "csi-node-driver-registrar":
                continue
            if binary not in known:
                problems.append(f"{o['metadata']['name']}/{c['name']}: runs {binary!r}, "
                                f"not one of {sorted(known)}")
                continue
            for flag in flags_of(c.get("args", [])) - known[binary]:
                problems.append(f"{o['metadata']['name']}/{c['name']}: {binary} has no flag {flag}")
    return problems


def port_of(address):
    return int(address.rsplit(":", 1)[1])


def mount_for(container, volumes, path):
    """The (mount, volume) whose mountPath holds `path`, the deepest one."""
    best = None
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best[0]["mountPath"]):
                best = (m, volumes[m["name"]])
    return best


def host_path_of(container, volumes, path):
    found = mount_for(container, volumes, path)
    if not found or "hostPath" not in found[1]:
        return None
    mount, volume = found
    return posixpath.normpath(posixpath.join(volume["hostPath"]["path"],
                                             posixpath.relpath(path, mount["mountPath"])))


def directory_of_root(root):
    """The node directory a root of file:// origins lies in: a shared root's own, or for a root of
    namespaces (/srv/ckpt/{namespace}) the part before {namespace}."""
    path = root[len("shared:"):] if root.startswith("shared:") else root
    return path.split("/{namespace}", 1)[0]


def operator_args(objects):
    operator = find(objects, "Deployment", "granary-operator")
    if not operator:
        return []
    return [a for c in operator["spec"]["template"]["spec"]["containers"] for a in c.get("args", [])]


def daemonset_problems(objects, values):
    problems = []
    docs = objects
    ds = find(objects, "DaemonSet", "granary-cache-node")
    cm = find(objects, "ConfigMap", "granary-cache-node")
    if not ds or not cm:
        return ["no DaemonSet or ConfigMap granary-cache-node"]
    options = yaml.safe_load(cm["data"]["cache-node.yaml"])
    pod = ds["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    containers = {c["name"]: c for c in pod["containers"]}
    node = containers["cache-node"]
    if "--config=/etc/granary/config/cache-node.yaml" not in node["args"]:
        problems.append("the cache node is not given the options file")
    elif "configMap" not in mount_for(node, volumes, "/etc/granary/config/cache-node.yaml")[1]:
        problems.append("the options file is not the ConfigMap")
    ports = {p["name"]: p["containerPort"] for p in node["ports"]}
    if ports.get("grpc") != port_of(options["listen"]):
        problems.append(f"port grpc {ports.get('grpc')} is not what it listens on: {options['listen']}")
    if ports.get("transfer") != port_of(options["transferListen"]):
        problems.append(f"port transfer {ports.get('transfer')} is not {options['transferListen']}")
    if ports.get("metrics") != port_of(options["metricsAddress"]):
        problems.append(f"port metrics {ports.get('metrics')} is not {options['metricsAddress']}")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if node.get(probe, {}).get("httpGet", {}).get("port") != "metrics":
            problems.append(f"{probe} does not ask the metrics port")
    env = {e["name"]: e for e in node.get("env", [])}
    if "fieldRef" not in env.get("NODE_NAME", {}).get("valueFrom", {}):
        problems.append("NODE_NAME is not set from the downward API")
    gpu = values["cacheNode"]["gpuTelemetry"]
    if options.get("gpuTelemetry") != gpu["enabled"]:
        problems.append("the options file's gpuTelemetry is not gpuTelemetry.enabled")
    if options.get("gpuSampleIntervalMs") != gpu["sampleIntervalMs"]:
        problems.append("the options file's gpuSampleIntervalMs is not gpuTelemetry.sampleIntervalMs")
    nvidia = {k: env.get(k, {}).get("value") for k in ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")}
    wanted = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "utility"}
    if gpu["enabled"] and nvidia != wanted:
        problems.append(f"GPU telemetry is on but the NVIDIA runtime is not asked for NVML: {nvidia}")
    if not gpu["enabled"] and any(nvidia.values()):
        problems.append("GPU telemetry is off but the NVIDIA runtime is asked for the GPUs")
    pod_resources = options.get("podResourcesSocket")
    if gpu["enabled"]:
        host = pod_resources and host_path_of(node, volumes, pod_resources)
        wanted_host = f"{values['cacheNode']['kubeletDir'].rstrip('/')}/pod-resources/kubelet.sock"
        if host != wanted_host:
            problems.append(f"the PodResources socket is {host} on the host, not the kubelet's {wanted_host}")
    elif pod_resources:
        problems.append("GPU telemetry is off but the kubelet's PodResources socket is set")
    if set(env) - {"NODE_NAME"} - set(wanted):
        problems.append(f"unexpected environment: {sorted(set(env))}")
    if not node["securityContext"].get("privileged"):
        problems.append("the cache node must be privileged for Bidirectional propagation")

    kubelet = values["cacheNode"]["kubeletDir"]
    state = values["cacheNode"]["stateDir"]
    socket_host = host_path_of(node, volumes, options["csiSocket"])
    expected_socket = f"{kubelet}/plugins/csi.granary.io/csi.sock"
    if socket_host != expected_socket:
        problems.append(f"CSI socket lands at {socket_host} on the host, not {expected_socket}")
    # The registrar is a DaemonSet of its own on the same nodes: two registrars of a surge
    # rollout would share the registration socket, and the old one removes it when it stops.
    if "csi-node-driver-registrar" in containers:
        problems.append("the registrar is a sidecar of the surging cache node: a replaced pod's "
                        "registrar unregisters the driver")
    registrar_ds = find(objects, "DaemonSet", "granary-csi-registrar")
    if not registrar_ds:
        problems.append("no granary-csi-registrar DaemonSet")
    else:
        registrar_pod = registrar_ds["spec"]["template"]["spec"]
        registrar_volumes = {v["name"]: v for v in registrar_pod["volumes"]}
        registrar = registrar_pod["containers"][0]
        args = dict(a.split("=", 1) for a in registrar["args"])
        if host_path_of(registrar, registrar_volumes, args["--csi-address"]) != socket_host:
            problems.append("the registrar's --csi-address is not the plugin's socket")
        if args["--kubelet-registration-path"] != expected_socket:
            problems.append("--kubelet-registration-path is not the socket's host path")
        if host_path_of(registrar, registrar_volumes, "/registration") != f"{kubelet}/plugins_registry":
            problems.append("the registrar does not see the kubelet's plugins_registry")
        if registrar_ds["spec"]["updateStrategy"].get("rollingUpdate", {}).get("maxSurge"):
            problems.append("the registrar must not surge: two on a node race on one socket")
        for key in ("nodeSelector", "tolerations", "affinity"):
            if registrar_pod.get(key) != pod.get(key):
                problems.append(f"the registrar's {key} is not the cache node's: the driver is "
                                f"registered where no cache node serves it, or missing where one does")

    if values["cacheNode"]["mountKeeper"]["enabled"]:
        keeper = containers.get("mount-keeper")
        keeper_socket = options.get("mountKeeperSocket")
        if not keeper or not keeper_socket or options.get("mountKeeper", True) is not True:
            problems.append("the mount keeper is on but not run or not named to the cache node")
        else:
            if f"--serve-mount-keeper={keeper_socket}" not in keeper["args"]:
                problems.append("the keeper serves another socket than the cache node asks")
            # Node-scoped: a replacing pod's keeper and cache node reach the old pod's.
            a = host_path_of(node, volumes, keeper_socket)
            b = host_path_of(keeper, volumes, keeper_socket)
            if not a or a != b:
                problems.append("the keeper's socket is not at one path of the node for both containers")
            elif not a.startswith(posixpath.normpath(values["cacheNode"]["stateDir"]) + "/"):
                problems.append("the keeper's socket is not in the node's state directory")
            context = keeper["securityContext"]
            if context.get("privileged") or context.get("capabilities", {}).get("drop") != ["ALL"]:
                problems.append("the keeper needs no privileges and no capabilities")
            token = [a for a in keeper["args"] if a.startswith("--token-file=")]
            if not token or not mount_for(keeper, volumes, token[0].split("=", 1)[1]):
                problems.append("the keeper is not given the node's token")
    else:
        # The cache node asks a keeper by default: off must be said in its options file.
        if "mount-keeper" in containers or options.get("mountKeeper") is not False:
            problems.append("the mount keeper is off but the cache node still asks for one")

    # A replaced pod hands its mounts over only to a pod started beside it (maxSurge).
    strategy = ds["spec"]["updateStrategy"]
    rolling = strategy.get("rollingUpdate")
    if strategy.get("type") != "RollingUpdate":
        if rolling is not None:
            problems.append(f"rollingUpdate is set for an updateStrategy of type {strategy.get('type')}")
    elif values["cacheNode"]["hostNetwork"]:
        if rolling.get("maxSurge", 0):
            problems.append("hostNetwork pods cannot surge: their ports collide")
    elif values["cacheNode"]["mountKeeper"]["enabled"]:
        if not rolling.get("maxSurge") or rolling.get("maxUnavailable") != 0:
            problems.append("a rolling update that does not surge ends the mounts of running pods")

    roots = options.get("fileOriginRoots")
    if roots != (values["cacheNode"].get("fileOriginRoots") or []):
        problems.append(f"the options file's fileOriginRoots {roots} are not cacheNode.fileOriginRoots")
    for r in roots or []:
        d = directory_of_root(r)
        found = mount_for(node, volumes, d)
        if host_path_of(node, volumes, d) != posixpath.normpath(d) or not found[0].get("readOnly"):
            problems.append(f"file origin root {r} is not the node's directory {d}, read-only")
    roots = options.get("checkpointOriginRoots")
    if roots != (values["cacheNode"].get("checkpointOriginRoots") or []):
        problems.append(f"the options file's checkpointOriginRoots {roots} are not "
                        "cacheNode.checkpointOriginRoots")
    for r in roots or []:
        d = directory_of_root(r)
        found = mount_for(node, volumes, d)
        if host_path_of(node, volumes, d) != posixpath.normpath(d) or found[0].get("readOnly"):
            problems.append(f"checkpoint origin root {r} is not the node's directory {d}, read-write")
    # The operator says in a TrainingJob's status which file:// checkpoints the nodes refuse: it
    # must be given the nodes' roots.
    given = [a.split("=", 1)[1] for a in operator_args(docs)
             if a.startswith("--checkpoint-origin-roots=")]
    expected = values["cacheNode"].get("checkpointOriginRoots") or []
    if len(given) != 1 or json.loads(given[0]) != expected:
        problems.append(f"the operator's --checkpoint-origin-roots {given} are not "
                        f"cacheNode.checkpointOriginRoots ({expected!r})")

    found = mount_for(node, volumes, state)
    if host_path_of(node, volumes, state) != posixpath.normpath(state):
        problems.append(f"state directory {state} is not the node's")
    elif found[0].get("mountPropagation") != "Bidirectional":
        problems.append("the state directory (dataset mounts) needs Bidirectional propagation")
    for d in options["cacheDirectories"]:
        if host_path_of(node, volumes, d["path"]) != d["path"]:
            problems.append(f"cache directory {d['path']} is not the node's")
    pods = f"{kubelet}/pods"
    found = mount_for(node, volumes, pods + "/x")
    if host_path_of(node, volumes, pods) != pods or found[0].get("mountPropagation") != "Bidirectional":
        problems.append(f"{pods} is not mounted with Bidirectional propagation")
    fuse = mount_for(node, volumes, "/dev/fuse")
    if not fuse or fuse[1].get("hostPath", {}).get("type") != "CharDevice":
        problems.append("/dev/fuse is not mounted")
    token = mount_for(node, volumes, options["tokenFile"])
    if not token or "secret" not in token[1]:
        problems.append("the token file is not the Secret")
    operator = find(objects, "Deployment", "granary-operator")
    op_container = operator["spec"]["template"]["spec"]["containers"][0]
    op_volumes = {v["name"]: v for v in operator["spec"]["template"]["spec"]["volumes"]}
    op_token = dict(a.split("=", 1) for a in op_container["args"] if "=" in a)[
        "--cache-node-token-file"]
    found = mount_for(op_container, op_volumes, op_token)
    if not found or found[1].get("secret") != token[1].get("secret"):
        problems.append("the operator reads another token than the cache nodes")

    driver = find(objects, "CSIDriver", "csi.granary.io")
    if not driver:
        problems.append("no CSIDriver csi.granary.io")
    else:
        spec = driver["spec"]
        if spec.get("attachRequired") is not False or spec.get("podInfoOnMount") is not True \
                or spec.get("volumeLifecycleModes") != ["Ephemeral"]:
            problems.append(f"CSIDriver spec {spec}: needs no attach, pod info, Ephemeral")
        if spec.get("requiresRepublish") is not True:
            problems.append("CSIDriver: needs requiresRepublish, so that a restarted cache node "
                            "gets each checkpoint volume's credentials again and resumes its drain")
    return problems


# values.yaml's defaults that must equal a constant of common/names.h, which the binaries use.
NAMED_DEFAULTS = {
    ("cacheNode", "grpcPort"): "kCacheNodeGrpcPort",
    ("cacheNode", "metricsPort"): "kCacheNodeMetricsPort",
    ("operator", "metricsPort"): "kOperatorMetricsPort",
    ("scheduler", "metricsPort"): "kSchedulerMetricsPort",
    ("scheduler", "extenderPort"): "kSchedulerExtenderPort",
    ("scheduler", "name"): "kScheduler",
}


def monitor_problems(objects):
    """Every scrape endpoint honours the series' own labels: the cache node's GPU and pod series
    carry the pod a GPU serves (namespace, pod, container), the operator's job series the
    TrainingJob (namespace, job); the target's labels must not rename them exported_*."""
    problems = []
    for o in objects:
        endpoints = {"ServiceMonitor": "endpoints", "PodMonitor": "podMetricsEndpoints"}.get(
            o.get("kind"))
        for endpoint in (o.get("spec", {}).get(endpoints, []) if endpoints else []):
            if endpoint.get("honorLabels") is not True:
                problems.append(f"{o['kind']} {o['metadata']['name']}: an endpoint without "
                                "honorLabels: true")
    return problems


def named_default_problems(root, values):
    names = open(os.path.join(root, "common", "names.h")).read()
    problems = []
    for (section, key), constant in NAMED_DEFAULTS.items():
        found = re.search(constant + r'\s*=\s*"?([^";]+)"?;', names)
        value = values[section][key]
        if not found or str(value) != found.group(1):
            problems.append(f"{section}.{key} is {value}, common/names.h {constant} is "
                            f"{found.group(1) if found else 'missing'}")
    return problems


def bad_values_problems(helm_binary, chart, path):
    expected = [line.split(":", 1)[1].strip() for line in open(path)
                if line.startswith("# expect:")]
    if not expected:
        return [f"{path}: no '# expect:' line"]
    _, stderr = render(helm_binary, chart, path)
    if not stderr:
        return ["rendered, but must be refused"]
    return [f"message lacks {e!r}: {stderr.strip()}" for e in expected if e not in stderr]


def load_values(chart, values_file):
    values = yaml.safe_load(open(os.path.join(chart, "values.yaml")))

    def merge(base, extra):
        for k, v in extra.items():
            if isinstance(v, dict) and isinstance(base.get(k), dict):
                merge(base[k], v)
            else:
                base[k] = v
    if values_file:
        merge(values, yaml.safe_load(open(values_file)) or {})
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the repository")
    parser.add_argument("--helm", required=True, help="the helm binary")
    parser.add_argument("--binary", action="append", required=True,
                        help="granary-operator, granary-scheduler or granary-cache-node (repeat)")
    args = parser.parse_args()
    chart = os.path.join(args.root, "charts", "granary")
    checks = Checks()

    option_files = [None] + sorted(glob.glob(os.path.join(HERE, "options", "*.yaml")))
    for values_file in option_files:
        label = os.path.basename(values_file) if values_file else "defaults"
        extra = ["-f", values_file] if values_file else []
        lint = helm(["lint", "--strict", *extra], args.helm, chart)
        checks.check(f"helm lint --strict ({label})",
                     [] if lint.returncode == 0 else [lint.stdout + lint.stderr])
        objects, error = render(args.helm, chart, values_file)
        if objects is None:
            checks.check(f"helm template ({label})", [error])
            continue
        checks.check(f"rendered objects ({label})", objects_problems(objects))
        checks.check(f"flags the binaries know ({label})", flag_problems(objects, args.binary))
        checks.check(f"scrape endpoints honour the series' labels ({label})",
                     monitor_problems(objects))
        checks.check(f"cache-node DaemonSet ({label})",
                     daemonset_problems(objects, load_values(chart, values_file)))
        checks.check(f"rendezvous stores' NetworkPolicies ({label})",
                     network_policy_problems(args.root, objects, load_values(chart, values_file)))

    checks.check("default ports and names equal common/names.h",
                 named_default_problems(args.root, load_values(chart, None)))
    default_roots = load_values(chart, None)["cacheNode"].get("fileOriginRoots")
    checks.check("no node directory open to file:// sources by default",
                 [] if default_roots == [] else [f"cacheNode.fileOriginRoots is {default_roots}"])
    default_roots = load_values(chart, None)["cacheNode"].get("checkpointOriginRoots")
    checks.check("no node directory open to file:// checkpoints by default",
                 [] if default_roots == [] else
                 [f"cacheNode.checkpointOriginRoots is {default_roots}"])

    crd_problems = []
    for source in sorted(glob.glob(os.path.join(args.root, "crds", "*.yaml"))):
        copy = os.path.join(chart, "crds", os.path.basename(source))
        if not os.path.exists(copy) or not filecmp.cmp(source, copy, shallow=False):
            crd_problems.append(f"{copy} differs from {source}: cp crds/*.yaml charts/granary/crds/")
    extra = set(map(os.path.basename, glob.glob(os.path.join(chart, "crds", "*")))) - set(
        map(os.path.basename, glob.glob(os.path.join(args.root, "crds", "*.yaml"))))
    crd_problems += [f"charts/granary/crds/{e} is not in crds/" for e in sorted(extra)]
    checks.check("chart CRDs identical to crds/", crd_problems)

    for path in sorted(glob.glob(os.path.join(HERE, "bad-values", "*.yaml"))):
        checks.check(f"refused: {os.path.basename(path)}",
                     bad_values_problems(args.helm, chart, path))

    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
