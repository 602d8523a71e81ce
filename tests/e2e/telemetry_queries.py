#!/usr/bin/env python3
"""What the end-to-end telemetry test (tests/e2e/telemetry_e2e_test.cc) asks Prometheus, read
from the files as they are now.

Writes into --out:
  prometheus.yml  scrapes each --target every second with the job and target labels, and the
                  honor_labels, that the chart's ServiceMonitors and PodMonitor give it
                  (charts/granary/templates/monitoring.yaml, rendered with helm as the chart
                  ships it with monitoring.enabled=true), as prometheus-operator builds them;
                  loads alerts.yaml.
  alerts.yaml     a copy of charts/granary/alerts/granary.rules.yaml whose alerts fire without
                  waiting: `for: 0s`, and every `[5m]` window of their expressions shortened to
                  --alert-window, so that a run of seconds can fire them. The chart's file stays
                  as it is; queries.json carries its expressions unchanged.
  queries.json    every PromQL expression of every dashboard panel, every template-variable query
                  of every dashboard (charts/granary/dashboards/*.json, read through
                  tests/chart/check_dashboards.py) and every alert, with Grafana's variables
                  replaced by --var values; with each panel's title, place, unit, thresholds,
                  overrides, transformations and legends, for the pictures of
                  scripts/render_dashboards.py; and the metrics of each panel expression that
                  no binary declares yet ("undeclared": check_dashboards.py, ctest
                  dashboards.static, fails on those).

Usage: telemetry_queries.py --root REPO --helm HELM --out DIR
         --target granary-cache-node=127.0.0.1:9400,NAMESPACE,POD ...
         --var namespace=ns --var job=bert ... [--alert-window 20s]
Exits 1 with the reason when the chart cannot be rendered or read.
"""
import argparse
import glob
import json
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "chart"))
import check_dashboards  # noqa: E402  (the dashboards' walk and Grafana's variable syntax)

# Grafana's own variables, as a dashboard over a few minutes of a 1 s scrape would set them.
GRAFANA_DEFAULTS = {"__rate_interval": "30s", "__interval": "2s", "__interval_ms": "2000",
                    "__range": "5m", "__range_s": "300", "__range_ms": "300000"}
# The container each component's metrics port belongs to (charts/granary/templates).
CONTAINERS = {"granary-cache-node": "cache-node", "granary-operator": "operator",
              "granary-scheduler": "scheduler"}


def parse_targets(items):
    """{component: (address, pod namespace, pod name)}"""
    out = {}
    for item in items:
        component, _, rest = item.partition("=")
        address, pod_namespace, pod = (rest.split(",") + ["", ""])[:3]
        out[component] = (address, pod_namespace, pod)
    return out


def scrape_configs(helm, root, targets):
    """One scrape job per monitor of the chart that has a --target, labelled as
    prometheus-operator labels its targets: a ServiceMonitor's job is its Service's name, a
    PodMonitor's is "<namespace>/<name>"; both add namespace, pod, container and endpoint (a
    ServiceMonitor also service); honorLabels becomes honor_labels."""
    objects, error = check_dashboards.helm_render(helm, root, "monitoring.enabled=true")
    if objects is None:
        sys.exit(f"helm template --set monitoring.enabled=true failed: {error}")
    services = [o for o in objects if o.get("kind") == "Service"]
    configs, configured = [], set()
    for monitor in objects:
        kind = monitor.get("kind")
        if kind not in ("ServiceMonitor", "PodMonitor"):
            continue
        selector = monitor["spec"]["selector"].get("matchLabels", {})
        component = selector.get("app.kubernetes.io/name")
        if component not in targets:
            continue
        address, pod_namespace, pod = targets[component]
        configured.add(component)
        endpoints = monitor["spec"].get("endpoints" if kind == "ServiceMonitor"
                                        else "podMetricsEndpoints", [])
        for i, endpoint in enumerate(endpoints):
            labels = {"namespace": pod_namespace, "pod": pod,
                      "container": CONTAINERS.get(component, component),
                      "endpoint": endpoint.get("port", "")}
            if kind == "ServiceMonitor":
                service = next((s for s in services
                                if s["spec"].get("selector", {}).items() >= selector.items()),
                               None)
                if service is None:
                    sys.exit(f"ServiceMonitor {monitor['metadata']['name']}: no Service selects "
                             f"the pods it selects")
                job = service["metadata"]["name"]
                labels["service"] = job
            else:
                job = f"{monitor['metadata']['namespace']}/{monitor['metadata']['name']}"
            labels["job"] = job
            configs.append({
                "job_name": f"{kind.lower()}/{monitor['metadata']['name']}/{i}",
                "honor_labels": bool(endpoint.get("honorLabels", False)),
                "metrics_path": endpoint.get("path", "/metrics"),
                "scrape_interval": "1s",
                "static_configs": [{"targets": [address], "labels": labels}],
            })
    missing = set(targets) - configured
    if missing:
        sys.exit(f"the chart's monitoring has no monitor for {sorted(missing)}")
    return configs


def fast_alerts(rules, window):
    """The rule file with every alert firing at once and its 5-minute windows shortened."""
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = "0s"
            rule["expr"] = str(rule["expr"]).replace("[5m]", f"[{window}]")
    return rules


def substitute(expr, values):
    """(expr with Grafana's variables replaced, names without a value)."""
    missing = set()

    def value(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name in values:
            return values[name]
        missing.add(name)
        return m.group(0)
    return check_dashboards.VARIABLE_REF.sub(value, expr), sorted(missing)


def label_values_label(query):
    m = re.fullmatch(r"\s*label_values\s*\((.*),\s*(\w+)\s*\)\s*", query, re.S)
    return m.group(2) if m else None


def grafana_regex(regex):
    """A Grafana variable's regex ("/.../flags") as a plain pattern, or ""."""
    m = re.fullmatch(r"/(.*)/(\w*)", regex or "", re.S)
    return m.group(1) if m else (regex or "")


def undeclared_in(expr, known):
    """Metric names of `expr` that no binary declares (nor check_dashboards.PENDING lists)."""
    return sorted({name for name in check_dashboards.metrics_in(expr)
                   if check_dashboards.resolve(name, known)[0] is None})


def queries(root, values):
    known = check_dashboards.known_metrics(check_dashboards.declared_metrics(root))
    out = []
    for path in sorted(glob.glob(os.path.join(root, check_dashboards.DASHBOARDS, "*.json"))):
        name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            dash = json.load(f)
        base = {"dashboard": name, "dashboardTitle": dash.get("title", name)}
        for v in dash.get("templating", {}).get("list", []):
            if v.get("type") != "query":
                continue
            raw = check_dashboards.variable_query(v)
            expr = check_dashboards.variable_promql(raw)
            if not expr:
                continue
            query, missing = substitute(expr, values)
            out.append({**base, "kind": "variable", "name": v.get("name"), "raw": raw,
                        "expr": expr, "query": query, "missing": missing,
                        "label": label_values_label(raw), "regex": grafana_regex(v.get("regex")),
                        "expected": values.get(v.get("name"), "")})
        for panel in check_dashboards.walk_panels(dash.get("panels", [])):
            if panel.get("type") == "row":
                out.append({**base, "kind": "row", "title": panel.get("title", ""),
                            "gridPos": panel.get("gridPos", {})})
                continue
            defaults = panel.get("fieldConfig", {}).get("defaults", {})
            for target in panel.get("targets") or []:
                expr = target.get("expr", "")
                query, missing = substitute(expr, values)
                out.append({**base, "kind": "panel", "panelId": panel.get("id"),
                            "title": panel.get("title", ""), "type": panel.get("type", ""),
                            "gridPos": panel.get("gridPos", {}), "unit": defaults.get("unit", ""),
                            "min": defaults.get("min"), "max": defaults.get("max"),
                            "thresholds": defaults.get("thresholds", {}).get("steps", []),
                            "thresholdsStyle": defaults.get("custom", {})
                            .get("thresholdsStyle", {}).get("mode", "off"),
                            "overrides": panel.get("fieldConfig", {}).get("overrides", []),
                            "transformations": panel.get("transformations", []),
                            "refId": target.get("refId", ""), "expr": expr, "query": query,
                            "missing": missing, "undeclared": undeclared_in(expr, known),
                            "legendFormat": target.get("legendFormat", "")})
    with open(os.path.join(root, check_dashboards.RULES), encoding="utf-8") as f:
        rules = yaml.safe_load(f)
    for group in rules["groups"]:
        for rule in group["rules"]:
            expr = str(rule["expr"]).strip()
            out.append({"kind": "alert", "dashboard": os.path.basename(check_dashboards.RULES),
                        "name": rule.get("alert", ""), "expr": expr, "query": expr,
                        "missing": []})
    return out, rules


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--helm", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--target", action="append", default=[],
                        help="COMPONENT=ADDRESS,POD_NAMESPACE,POD")
    parser.add_argument("--var", action="append", default=[], help="NAME=VALUE")
    parser.add_argument("--alert-window", default="20s")
    args = parser.parse_args()
    values = dict(GRAFANA_DEFAULTS)
    values.update(v.split("=", 1) for v in args.var)

    found, rules = queries(args.root, values)
    with open(os.path.join(args.out, "queries.json"), "w") as f:
        json.dump(found, f, indent=1)
    alerts = os.path.join(args.out, "alerts.yaml")
    with open(alerts, "w") as f:
        yaml.safe_dump(fast_alerts(rules, args.alert_window), f, sort_keys=False)
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [alerts],
        "scrape_configs": scrape_configs(args.helm, args.root, parse_targets(args.target)),
    }
    with open(os.path.join(args.out, "prometheus.yml"), "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
