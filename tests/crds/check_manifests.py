#!/usr/bin/env python3
"""Checks granary's CRDs and manifests the way a real API server would.

1. Every CRD parses, is well-formed (names, versions, status subresource, printer columns
   that point at fields of the schema) and its schema is structural.
2. Every CEL rule parses and names only fields the schema declares (tests/crds/cel.py).
3. Every example under examples/ validates: defaults applied, OpenAPI schema with strict
   field validation (kubectl's default), then the CEL rules. The examples cover every source
   kind and every warm policy.
4. Every manifest under tests/crds/invalid/ is rejected with the message its `# expect:`
   lines give. A file with two documents is an update from the first to the second (for
   rules on oldSelf).
5. With --granaryctl, granaryctl validate accepts every example and rejects every invalid
   manifest that is not an update, naming the field its `# field:` line gives.
6. With --node, every CEL evaluation above is repeated with @bufbuild/cel (a second,
   independent CEL implementation, tests/crds/cel_crosscheck.mjs) and must agree.

Prints one line per check and "N passed, N failed" at the end; exits 1 on any failure.
"""
import argparse
import copy
import glob
import json
import os
import subprocess
import sys

import jsonschema
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cel  # noqa: E402

GROUP = "granary.io"
HERE = os.path.dirname(os.path.abspath(__file__))

# Every CEL evaluation made, for the cross-check: (rule, self, oldSelf, result or None on error).
EVALUATIONS = []
JUNCTOR_FORBIDDEN = ("type", "default", "additionalProperties", "nullable", "description")


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def expect(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"ok    {what}")
        else:
            self.failed += 1
            print(f"FAIL  {what}" + (f"\n      {detail}" if detail else ""))


# Short names kubectl resolves before a CRD's: every built-in kind's in Kubernetes 1.28
# (`kubectl api-resources` on a 1.28 API server), and those of add-ons often installed beside
# granary. kubectl resolves built-in kinds first, so `kubectl get ds` lists DaemonSets even where
# a CRD also claims `ds`; an add-on's collision depends on discovery order.
TAKEN_SHORT_NAMES = {
    # core/v1
    "cs": "ComponentStatus", "cm": "ConfigMap", "ep": "Endpoints", "ev": "Event",
    "limits": "LimitRange", "ns": "Namespace", "no": "Node", "pvc": "PersistentVolumeClaim",
    "pv": "PersistentVolume", "po": "Pod", "rc": "ReplicationController",
    "quota": "ResourceQuota", "sa": "ServiceAccount", "svc": "Service",
    # apiextensions, apps, autoscaling, batch, certificates, networking, policy, scheduling, storage
    "crd": "CustomResourceDefinition", "crds": "CustomResourceDefinition",
    "ds": "DaemonSet", "deploy": "Deployment", "rs": "ReplicaSet", "sts": "StatefulSet",
    "hpa": "HorizontalPodAutoscaler", "cj": "CronJob", "csr": "CertificateSigningRequest",
    "ing": "Ingress", "netpol": "NetworkPolicy", "pdb": "PodDisruptionBudget",
    "pc": "PriorityClass", "sc": "StorageClass",
    # add-ons: snapshots, Volcano, Kueue, Prometheus Operator, cert-manager, Argo, Knative, Istio
    "vs": "VolumeSnapshot", "vsc": "VolumeSnapshotContent", "vsclass": "VolumeSnapshotClass",
    "vcjob": "Volcano Job", "vj": "Volcano Job", "pg": "Volcano PodGroup",
    "podgroup": "Volcano PodGroup", "q": "Volcano Queue", "wl": "Kueue Workload",
    "queue": "Kueue LocalQueue", "lq": "Kueue LocalQueue", "cq": "Kueue ClusterQueue",
    "prom": "Prometheus", "smon": "ServiceMonitor", "pmon": "PodMonitor", "am": "Alertmanager",
    "promrule": "PrometheusRule", "cert": "cert-manager Certificate",
    "certs": "cert-manager Certificate", "cr": "cert-manager CertificateRequest",
    "wf": "Argo Workflow", "app": "Argo CD Application", "ksvc": "Knative Service",
    "gw": "Istio Gateway", "dr": "Istio DestinationRule", "se": "Istio ServiceEntry",
}


# ---- structural schema ---------------------------------------------------------------------

# Every field of apiextensions.k8s.io/v1 JSONSchemaProps. kubectl sends fieldValidation=Strict,
# so an API server refuses a CRD with any other key (a wrapped description that YAML read as
# a key, say), while a lenient client would see it silently dropped.
JSON_SCHEMA_PROPS_FIELDS = {
    "id", "$schema", "$ref", "description", "type", "format", "title", "default", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "maxItems", "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties",
    "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not", "properties",
    "additionalProperties", "patternProperties", "dependencies", "additionalItems",
    "definitions", "externalDocs", "example", "nullable", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type", "x-kubernetes-map-type", "x-kubernetes-validations",
}


def structural_errors(schema, path="", root=True):
    errors = [f"{path or '<root>'}: unknown schema field {key!r} (not a JSONSchemaProps field)"
              for key in schema if key not in JSON_SCHEMA_PROPS_FIELDS]
    int_or_string = schema.get("x-kubernetes-int-or-string")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields")
    if "type" not in schema and not int_or_string and not preserve:
        errors.append(f"{path or '<root>'}: type is missing")
    if int_or_string:
        if "type" in schema:
            errors.append(f"{path}: x-kubernetes-int-or-string must not set type")
        if schema.get("anyOf") not in (None, [{"type": "integer"}, {"type": "string"}]):
            errors.append(f"{path}: int-or-string anyOf must be exactly [integer, string]")
    if preserve and schema.get("type") not in (None, "object"):
        errors.append(f"{path}: x-kubernetes-preserve-unknown-fields needs type object")
    if "properties" in schema and "additionalProperties" in schema:
        errors.append(f"{path}: properties and additionalProperties are mutually exclusive")
    for junctor in ("anyOf", "allOf", "oneOf"):
        for branch in schema.get(junctor, []):
            if int_or_string and junctor == "anyOf":
                continue
            for key in JUNCTOR_FORBIDDEN:
                if key in branch:
                    errors.append(f"{path}: {junctor} must not set {key}")
    if schema.get("x-kubernetes-list-type") == "map":
        items = schema.get("items", {})
        for key in schema.get("x-kubernetes-list-map-keys", []):
            prop = items.get("properties", {}).get(key)
            if prop is None:
                errors.append(f"{path}: list-map key {key} is not a property of the items")
            elif key not in items.get("required", []) and "default" not in prop:
                errors.append(f"{path}: list-map key {key} must be required or defaulted")
    if "enum" in schema and schema.get("type") == "string":
        bad = [v for v in schema["enum"] if not isinstance(v, str)]
        if bad:
            errors.append(f"{path}: enum values {bad} are not strings")
    if root:
        meta = schema.get("properties", {}).get("metadata")
        if meta is not None and set(meta.get("properties", {})) - {"name", "generateName"}:
            errors.append("metadata: only name and generateName may be restricted")
    if "default" in schema:
        try:
            jsonschema.Draft4Validator(strict(schema)).validate(schema["default"])
        except jsonschema.ValidationError as e:
            errors.append(f"{path}: default does not validate: {e.message}")
    for name, prop in schema.get("properties", {}).items():
        errors += structural_errors(prop, f"{path}.{name}" if path else name, False)
    if isinstance(schema.get("items"), dict):
        errors += structural_errors(schema["items"], f"{path}[*]", False)
    if isinstance(schema.get("additionalProperties"), dict):
        errors += structural_errors(schema["additionalProperties"], f"{path}[*]", False)
    return errors


def strict(schema):
    """A JSON Schema in which objects reject fields the schema does not declare."""
    out = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key in ("default", "format", "nullable"):
            continue
        if key == "properties":
            value = {k: strict(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            value = strict(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            value = [strict(v) for v in value]
        out[key] = value
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


# ---- defaulting, validation and CEL --------------------------------------------------------

def apply_defaults(value, schema):
    if isinstance(value, dict):
        for name, prop in schema.get("properties", {}).items():
            if name not in value and "default" in prop:
                value[name] = copy.deepcopy(prop["default"])
            if name in value:
                apply_defaults(value[name], prop)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for item in value.values():
                apply_defaults(item, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(item, schema["items"])


def cel_errors(value, old, schema, path, compiled):
    errors = []
    for rule in schema.get("x-kubernetes-validations", []):
        expr = compiled[rule["rule"]]
        if cel.uses_old_self(expr) and old is None:
            continue
        try:
            ok = cel.evaluate(expr, {"self": value, "oldSelf": old})
            EVALUATIONS.append((rule["rule"], value, old, ok))
        except cel.CelError as e:
            EVALUATIONS.append((rule["rule"], value, old, None))
            errors.append(f"{path}: rule {rule['rule']!r} failed to evaluate: {e}")
            continue
        if not ok:
            errors.append(f"{path}: Invalid value: {rule.get('message', rule['rule'])}")
    if isinstance(value, dict):
        for name, prop in schema.get("properties", {}).items():
            if name in value:
                child_old = old.get(name) if isinstance(old, dict) else None
                errors += cel_errors(value[name], child_old, prop, f"{path}.{name}" if path else name,
                                     compiled)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = schema.get("x-kubernetes-list-map-keys")
        for index, item in enumerate(value):
            child_old = None
            if keys and isinstance(old, list):  # list-map items are correlated by key
                child_old = next((o for o in old if all(o.get(k) == item.get(k) for k in keys)), None)
            errors += cel_errors(item, child_old, schema["items"], f"{path}[{index}]", compiled)
    return errors


def list_map_errors(value, schema, path):
    errors = []
    if isinstance(value, dict):
        for name, prop in schema.get("properties", {}).items():
            if name in value:
                errors += list_map_errors(value[name], prop, f"{path}.{name}" if path else name)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = schema.get("x-kubernetes-list-map-keys")
        if schema.get("x-kubernetes-list-type") == "map" and keys:
            seen = set()
            for index, item in enumerate(value):
                key = tuple(item.get(k) for k in keys)
                if key in seen:
                    errors.append(f"{path}[{index}]: Duplicate value: {dict(zip(keys, key))}")
                seen.add(key)
        for index, item in enumerate(value):
            errors += list_map_errors(item, schema["items"], f"{path}[{index}]")
    return errors


class Crd:
    def __init__(self, document):
        self.document = document
        version = document["spec"]["versions"][0]
        self.kind = document["spec"]["names"]["kind"]
        self.api_version = f"{document['spec']['group']}/{version['name']}"
        self.schema = version["schema"]["openAPIV3Schema"]
        self.validator = jsonschema.Draft4Validator(strict(self.schema))
        self.compiled = {}

    def compile_rules(self):
        errors = []

        def walk(schema, path):
            for rule in schema.get("x-kubernetes-validations", []):
                try:
                    expr = cel.parse(rule["rule"])
                    cel.check(expr, schema)
                    self.compiled[rule["rule"]] = expr
                except cel.CelError as e:
                    errors.append(f"{path or '<root>'}: {rule['rule']!r}: {e}")
                if not rule.get("message"):
                    errors.append(f"{path}: rule {rule['rule']!r} has no message")
            for name, prop in schema.get("properties", {}).items():
                walk(prop, f"{path}.{name}" if path else name)
            if isinstance(schema.get("items"), dict):
                walk(schema["items"], f"{path}[*]")

        walk(self.schema, "")
        return errors

    def validate(self, obj, old=None):
        obj = copy.deepcopy(obj)
        apply_defaults(obj, self.schema)
        errors = []
        for error in sorted(self.validator.iter_errors(obj), key=lambda e: list(e.path)):
            path = ".".join(str(p) for p in error.path)
            errors.append(f"{path or '<root>'}: {error.message}")
        errors += list_map_errors(obj, self.schema, "")
        if not errors:
            if old is not None:
                old = copy.deepcopy(old)
                apply_defaults(old, self.schema)
            errors += cel_errors(obj, old, self.schema, "", self.compiled)
        return errors


def crosscheck_cel(node, checks):
    """Repeats every evaluation with @bufbuild/cel; results must agree (errors with errors)."""
    batch = [{"rule": r, "self": v, "oldSelf": o} for r, v, o, _ in EVALUATIONS]
    result = subprocess.run([node, os.path.join(HERE, "cel_crosscheck.mjs")], cwd=HERE,
                            input=json.dumps(batch), capture_output=True, text=True)
    if result.returncode != 0:
        checks.expect(False, "@bufbuild/cel ran", result.stderr.strip()[-2000:])
        return
    theirs = json.loads(result.stdout)
    disagreements = []
    for (rule, value, old, ours), other in zip(EVALUATIONS, theirs):
        other = None if isinstance(other, dict) else other
        if ours != other:
            disagreements.append(f"{rule!r} on {json.dumps(value)[:120]}: cel.py {ours}, "
                                 f"@bufbuild/cel {other}")
    checks.expect(len(theirs) == len(EVALUATIONS) and not disagreements,
                  f"{len(EVALUATIONS)} CEL evaluations agree with @bufbuild/cel",
                  "; ".join(disagreements[:5]))
    rejected = sum(1 for *_, ours in EVALUATIONS if ours is False)
    checks.expect(rejected > 0, f"{rejected} of them reject, so both sides were exercised")


def schema_has_path(schema, json_path):
    node = schema
    for part in json_path.strip(".").split("."):
        if part in ("metadata",) and node is schema:
            return True
        props = node.get("properties", {})
        if part not in props:
            return False
        node = props[part]
    return True


def load_yaml_documents(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True, help="the repository root")
    parser.add_argument("--granaryctl", help="path to granaryctl, to cross-check its validation")
    parser.add_argument("--node", help="path to node, to cross-check CEL with @bufbuild/cel")
    args = parser.parse_args()
    checks = Checks()

    crds = {}
    for path in sorted(glob.glob(os.path.join(args.root, "crds", "*.yaml"))):
        name = os.path.relpath(path, args.root)
        documents = load_yaml_documents(path)
        checks.expect(len(documents) == 1, f"{name} holds one CRD")
        document = documents[0]
        spec = document["spec"]
        checks.expect(document["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}",
                      f"{name} is named <plural>.<group>")
        checks.expect(spec["group"] == GROUP and "granary" in spec["names"].get("categories", []),
                      f"{name} is in group {GROUP} and category granary")
        versions = spec["versions"]
        checks.expect([v["name"] for v in versions if v.get("storage")] == ["v1alpha1"],
                      f"{name} stores v1alpha1")
        checks.expect(all("status" in v.get("subresources", {}) for v in versions),
                      f"{name} enables the status subresource")
        crd = Crd(document)
        for column in versions[0].get("additionalPrinterColumns", []):
            checks.expect(schema_has_path(crd.schema, column["jsonPath"]),
                          f"{name} printer column {column['name']} -> {column['jsonPath']} exists")
        errors = structural_errors(crd.schema)
        checks.expect(not errors, f"{name} schema is structural", "; ".join(errors))
        errors = crd.compile_rules()
        checks.expect(not errors, f"{name} CEL rules compile ({len(crd.compiled)} rules)",
                      "; ".join(errors))
        crds[(crd.api_version, crd.kind)] = crd

    expected_names = {("granary.io/v1alpha1", "Dataset"), ("granary.io/v1alpha1", "TrainingJob")}
    checks.expect(set(crds) == expected_names, "CRDs exist for Dataset and TrainingJob")
    for crd in crds.values():
        names = crd.document["spec"]["names"]
        taken = sorted(n for n in names.get("shortNames", []) + [names["singular"], names["plural"]]
                       if n in TAKEN_SHORT_NAMES)
        checks.expect(not taken, f"{crd.kind}'s names are no other kind's short name",
                      ", ".join(f"{n} is {TAKEN_SHORT_NAMES[n]}'s" for n in taken))

    source_kinds, warm_policies = set(), set()
    example_files = sorted(glob.glob(os.path.join(args.root, "examples", "**", "*.yaml"), recursive=True))
    for path in example_files:
        for document in load_yaml_documents(path):
            key = (document.get("apiVersion"), document.get("kind"))
            if key not in crds:
                continue
            label = f"{os.path.relpath(path, args.root)} {document['kind']}/{document['metadata']['name']}"
            errors = crds[key].validate(document)
            checks.expect(not errors, f"example {label} validates", "; ".join(errors))
            if document["kind"] == "Dataset":
                spec = document["spec"]
                sources = [spec["source"]] if "source" in spec else spec.get("mounts", [])
                source_kinds.update(s["uri"].split("://")[0].replace("https", "http") for s in sources)
                warm_policies.add(spec.get("cache", {}).get("warm", "OnCreate"))
    checks.expect(source_kinds == {"s3", "http", "file", "dataset"},
                  f"examples cover every source kind (found {sorted(source_kinds)})")
    checks.expect(warm_policies == {"OnCreate", "OnJob", "Never"},
                  f"examples cover every warm policy (found {sorted(warm_policies)})")

    invalid_files = sorted(glob.glob(os.path.join(args.root, "tests", "crds", "invalid", "*.yaml")))
    checks.expect(len(invalid_files) >= 10, f"{len(invalid_files)} invalid manifests to check")
    for path in invalid_files:
        name = os.path.relpath(path, args.root)
        with open(path) as f:
            lines = f.read().splitlines()
        expects = [l.split(":", 1)[1].strip() for l in lines if l.startswith("# expect:")]
        fields = [l.split(":", 1)[1].strip() for l in lines if l.startswith("# field:")]
        documents = load_yaml_documents(path)
        old, new = (documents[0], documents[1]) if len(documents) == 2 else (None, documents[0])
        crd = crds.get((new.get("apiVersion"), new.get("kind")))
        if not expects or crd is None:
            checks.expect(False, f"{name} names an expected message and a granary kind")
            continue
        errors = crd.validate(new, old)
        text = "\n".join(errors)
        checks.expect(errors and all(e in text for e in expects),
                      f"{name} is rejected: {expects[0]}", f"got: {text or 'accepted'}")
        if args.granaryctl and old is None:
            result = subprocess.run([args.granaryctl, "validate", "-f", path], capture_output=True,
                                    text=True)
            ok = result.returncode == 1 and fields and all(f in result.stderr for f in fields)
            checks.expect(ok, f"{name} is rejected by granaryctl naming {fields}",
                          f"exit {result.returncode}: {result.stderr.strip()}")

    if args.granaryctl:
        result = subprocess.run([args.granaryctl, "validate", "-f", os.path.join(args.root, "examples")],
                                capture_output=True, text=True)
        checks.expect(result.returncode == 0, "granaryctl accepts every example", result.stderr.strip())

    if args.node:
        crosscheck_cel(args.node, checks)

    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
