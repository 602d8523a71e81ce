#!/usr/bin/env python3
"""Draws one PNG per Grafana dashboard from the panels' data an e2e_test run saved.

    render_dashboards.py DATA_DIR OUT_DIR

DATA_DIR is what tests/e2e/telemetry_e2e_test.cc writes with GRANARY_DASHBOARD_PICTURES set:
<dashboard>/panel-<id>.json (a panel's title, type, place, unit and, per query, Prometheus'
query_range answer over the run), <dashboard>/rows.json and variables.json. Each dashboard
becomes OUT_DIR/<dashboard>.png: its panels where Grafana puts them (gridPos: 24 columns), each
drawn as time series (tables as tables of their last values), titled as in Grafana with the
test's variable values, with the queries' legends, the panel's unit, thresholds and overrides
(dashed lines, fixed colours, right axes); stat panels also print their last value.
Needs matplotlib (Debian: python3-matplotlib).
"""
import glob
import json
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

COLUMN_PX, ROW_PX, DPI = 64, 24, 80  # Grafana: 24 columns; a grid row is 30 px, drawn smaller
TITLE_PX = 20  # above each panel
BACKGROUND, PANEL, TEXT, GRID = "#111217", "#181b1f", "#d8d9da", "#2c3035"
COLORS = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9",
          "#705da0", "#37872d", "#fade2a", "#447ebc", "#c15c17"]


def scaled(value, steps, base):
    """(value / unit, unit suffix) for the largest unit of `steps` not above `value`."""
    magnitude, suffix = 1, steps[0]
    for s in steps[1:]:
        if abs(value) >= magnitude * base:
            magnitude, suffix = magnitude * base, s
    return value / magnitude, suffix


def formatter(unit):
    """A function printing a value in a Grafana unit."""
    def number(v):
        return f"{v:.0f}" if abs(v) >= 100 or v == int(v) else f"{v:.3g}"

    def fmt(v):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "NaN"
        if unit == "percentunit":
            return f"{number(v * 100)}%"
        if unit == "percent":
            return f"{number(v)}%"
        if unit in ("bytes", "decbytes"):
            x, s = scaled(v, ["B", "KiB", "MiB", "GiB", "TiB"], 1024)
            return f"{number(x)} {s}"
        if unit in ("Bps", "binBps"):
            x, s = scaled(v, ["B/s", "KiB/s", "MiB/s", "GiB/s"], 1024)
            return f"{number(x)} {s}"
        if unit == "s":
            if v != 0 and abs(v) < 1:
                return f"{number(v * 1000)} ms"
            return f"{number(v)} s"
        if unit in ("ops", "reqps"):
            return f"{number(v)} {'req/s' if unit == 'reqps' else 'ops/s'}"
        if unit == "watt":
            return f"{number(v)} W"
        if unit == "celsius":
            return f"{number(v)} °C"
        if unit == "hertz":
            x, s = scaled(v, ["Hz", "kHz", "MHz", "GHz"], 1000)
            return f"{number(x)} {s}"
        x, s = scaled(v, ["", "K", "M", "G"], 1000)
        return f"{number(x)}{s}"
    return fmt


def substitute(text, variables):
    return re.sub(r"\$\{(\w+)\}|\$(\w+)",
                  lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), text or "")


def legend(fmt, metric, expr):
    if fmt and fmt != "__auto":
        return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt).strip()
    labels = {k: v for k, v in metric.items() if k != "__name__"}
    if not labels:
        return metric.get("__name__", expr)
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))


GRAFANA_COLORS = {"green": "#73bf69", "red": "#f2495c", "yellow": "#fade2a", "orange": "#ff9830",
                  "blue": "#5794f2", "purple": "#b877d9", "transparent": None}


def overridden(panel, ref_id, name):
    """The panel's override properties that apply to the series `name` of query `ref_id`."""
    props = {}
    for override in panel.get("overrides") or []:
        matcher = override.get("matcher", {})
        kind, option = matcher.get("id"), str(matcher.get("options", ""))
        if (kind == "byFrameRefID" and option == ref_id) or (kind == "byName" and option == name) \
                or (kind == "byRegexp" and re.search(option, name)):
            for prop in override.get("properties", []):
                props[prop["id"]] = prop.get("value")
    return props


def color_of(props, index):
    color = (props.get("color") or {}).get("fixedColor")
    return GRAFANA_COLORS.get(color, color) if color else COLORS[index % len(COLORS)]


def style_axis(ax, fmt):
    ax.set_facecolor(PANEL)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.tick_params(colors=TEXT, labelsize=7, length=0)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v)))
    ax.yaxis.set_major_locator(MaxNLocator(4))


def threshold_color(steps, value):
    color = None
    for step in steps or []:
        if step.get("value") is None or (value is not None and value >= step["value"]):
            color = GRAFANA_COLORS.get(step.get("color"), step.get("color"))
    return color or TEXT


def draw_table(fig, panel, axes_box):
    """A table panel as Grafana shows it: one row per label set, a column per query's last value
    (named by the organize transformation, in the unit its override gives)."""
    renames = {}
    for t in panel.get("transformations") or []:
        if t.get("id") == "organize":
            renames.update(t.get("options", {}).get("renameByName", {}))
    rows, labels, columns = {}, [], []
    for target in panel["targets"]:
        column = renames.get(f"Value #{target['refId']}", f"Value #{target['refId']}")
        columns.append(column)
        for series in target["result"]:
            metric = {k: v for k, v in series["metric"].items() if k != "__name__"}
            for k in metric:
                if k not in labels:
                    labels.append(k)
            values = [float(v) for _, v in series["values"] if v not in ("NaN", "+Inf", "-Inf")]
            key = tuple(sorted(metric.items()))
            rows.setdefault(key, {})[column] = values[-1] if values else None
    ax = fig.add_axes(axes_box)
    ax.set_axis_off()
    if not rows:
        ax.text(0.5, 0.5, "No data", ha="center", va="center", color=TEXT, fontsize=11)
        return
    header = [renames.get(k, k) for k in labels] + columns
    cells, colors = [], []
    for key, values in rows.items():
        metric = dict(key)
        line, line_colors = [metric.get(k, "") for k in labels], [TEXT] * len(labels)
        for column in columns:
            props = overridden(panel, "", column)
            value = values.get(column)
            line.append(formatter(props.get("unit") or panel.get("unit") or "")(value)
                        if value is not None else "")
            line_colors.append(threshold_color((props.get("thresholds") or {}).get("steps"),
                                               value)
                               if props.get("custom.cellOptions", {}).get("type") == "color-text"
                               else TEXT)
        cells.append(line)
        colors.append(line_colors)
    row_h = min(0.2, 1 / (len(cells) + 1))
    table = ax.table(cellText=cells, colLabels=header, cellLoc="left", colLoc="left",
                     bbox=[0, 1 - row_h * (len(cells) + 1), 1, row_h * (len(cells) + 1)])
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    for (r, c), cell in table.get_celld().items():
        cell.set_facecolor(PANEL)
        cell.set_edgecolor(GRID)
        cell.get_text().set_color(TEXT if r == 0 else colors[r - 1][c])
        if r == 0:
            cell.get_text().set_fontweight("bold")


def draw_panel(fig, panel, box, variables, start):
    left, bottom, width, height = box
    fig_w, fig_h = fig.get_figwidth() * DPI, fig.get_figheight() * DPI
    title_h = TITLE_PX / fig_h
    if panel["type"] == "table":
        fig.patches.append(plt.Rectangle((left + 0.002, bottom + 0.002), width - 0.004,
                                         height - 0.004, transform=fig.transFigure,
                                         facecolor=PANEL, edgecolor=GRID, zorder=-1))
        fig.text(left + 0.006, bottom + height - 0.004, substitute(panel["title"], variables),
                 ha="left", va="top", color=TEXT, fontsize=10, fontweight="bold")
        draw_table(fig, panel, [left + 0.006, bottom + 0.01, width - 0.012,
                                height - title_h - 0.02])
        return
    # Margins in pixels: tick labels left (and right, for a right axis), the time below.
    has_right = any(prop.get("id") == "custom.axisPlacement" and prop.get("value") == "right"
                    for o in panel.get("overrides") or [] for prop in o.get("properties", []))
    margin_left, margin_right, margin_bottom = 64 / fig_w, (64 if has_right else 10) / fig_w, \
        20 / fig_h
    ax = fig.add_axes([left + margin_left, bottom + margin_bottom,
                       width - margin_left - margin_right,
                       height - margin_bottom - title_h - 6 / fig_h])
    fig.patches.append(plt.Rectangle((left + 0.002, bottom + 0.002), width - 0.004,
                                     height - 0.004, transform=fig.transFigure,
                                     facecolor=PANEL, edgecolor=GRID, zorder=-1))
    fig.text(left + 0.006, bottom + height - 0.004, substitute(panel["title"], variables),
             ha="left", va="top", color=TEXT, fontsize=10, fontweight="bold")
    fmt = formatter(panel.get("unit") or "")
    style_axis(ax, fmt)
    ax.grid(True, color=GRID, linewidth=0.6)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{int(v) // 60}:{int(v) % 60:02d}"))
    ax.xaxis.set_major_locator(MaxNLocator(6, integer=True))
    ax.set_xlim(0, max(1.0, panel["end"] - start))
    right, right_limits = None, {}
    lines, drawn, last, low = [], 0, None, math.inf
    for target in panel["targets"]:
        for series in target["result"]:
            points = [(float(t) - start, float(v)) for t, v in series["values"]
                      if v not in ("NaN", "+Inf", "-Inf")]
            if not points:
                continue
            name = legend(target.get("legendFormat"), series["metric"], target["expr"])
            props = overridden(panel, target["refId"], name)
            on = ax
            if props.get("custom.axisPlacement") == "right":
                if right is None:
                    right = ax.twinx()
                    style_axis(right, formatter(props.get("unit") or panel.get("unit") or ""))
                on = right
                right_limits.update({k: props[k] for k in ("min", "max") if k in props})
            xs, ys = zip(*points)
            dashed = (props.get("custom.lineStyle") or {}).get("fill") == "dash"
            lines += on.plot(xs, ys, "--" if dashed else "-", color=color_of(props, drawn),
                             linewidth=props.get("custom.lineWidth", 1.4), label=name,
                             drawstyle="steps-post" if props.get("custom.drawStyle") == "bars"
                             else "default")
            drawn += 1
            last = ys[-1] if last is None else last
            if on is ax:
                low = min(low, *ys)
    if panel.get("min") is not None:
        ax.set_ylim(bottom=panel["min"])
    elif low >= 0:  # Grafana's axes of non-negative figures start at 0
        ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], 1e-9))
    if panel.get("max") is not None:
        ax.set_ylim(top=panel["max"])
    if right is not None:
        right.set_ylim(bottom=right_limits.get("min"), top=right_limits.get("max"))
    if panel.get("thresholdsStyle") in ("line", "dashed", "line+area", "dashed+area"):
        for step in panel.get("thresholds") or []:
            color = GRAFANA_COLORS.get(step.get("color"), step.get("color"))
            if step.get("value") is not None and color:
                ax.axhline(step["value"], color=color, linewidth=1,
                           linestyle="--" if "dashed" in panel["thresholdsStyle"] else "-")
    if drawn == 0:
        ax.set_yticks([])
        ax.text(0.5, 0.5, "No data", transform=ax.transAxes, ha="center", va="center",
                color=TEXT, fontsize=11)
        return
    if panel["type"] == "stat" and last is not None:
        ax.text(0.98, 0.92, fmt(last), transform=ax.transAxes, ha="right", va="top",
                color=COLORS[0], fontsize=16, fontweight="bold", zorder=11,
                bbox={"facecolor": PANEL, "edgecolor": "none", "alpha": 0.85, "pad": 1})
    if panel["type"] != "stat" or drawn > 1:
        ax.legend(handles=lines, loc="upper left", fontsize=6.5, frameon=True, facecolor=PANEL,
                  edgecolor=GRID, labelcolor=TEXT, ncol=1 if drawn < 5 else 2,
                  handlelength=1.5, borderpad=0.3, labelspacing=0.2).set_zorder(10)


def render(dashboard_dir, out, variables):
    panels = []
    for path in glob.glob(os.path.join(dashboard_dir, "panel-*.json")):
        with open(path, encoding="utf-8") as f:
            panels.append(json.load(f))
    rows = []
    if os.path.exists(os.path.join(dashboard_dir, "rows.json")):
        with open(os.path.join(dashboard_dir, "rows.json"), encoding="utf-8") as f:
            rows = json.load(f)
    if not panels:
        return False
    grid_h = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels + rows)
    width_px, height_px = 24 * COLUMN_PX, grid_h * ROW_PX + 44
    fig = plt.figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI, facecolor=BACKGROUND)
    top = 1 - 44 / height_px
    unit_h = (grid_h * ROW_PX / height_px) / grid_h
    start = min(p["start"] for p in panels)
    title = panels[0]["dashboardTitle"]
    fig.text(0.006, 1 - 12 / height_px, title, ha="left", va="top", color=TEXT, fontsize=14,
             fontweight="bold")
    fig.text(0.994, 1 - 14 / height_px,
             ", ".join(f"{k} = {v}" for k, v in sorted(variables.items())
                       if k in ("namespace", "job", "dataset", "instance", "Hostname")),
             ha="right", va="top", color="#8e8e8e", fontsize=8)
    for row in rows:
        y = row["gridPos"]["y"]
        fig.text(0.006, top - y * unit_h - unit_h * 0.15, substitute(row["title"], variables),
                 ha="left", va="top", color=TEXT, fontsize=11, fontweight="bold")
    for panel in sorted(panels, key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"])):
        g = panel["gridPos"]
        box = (g["x"] / 24, top - (g["y"] + g["h"]) * unit_h, g["w"] / 24, g["h"] * unit_h)
        draw_panel(fig, panel, box, variables, start)
    fig.savefig(out, dpi=DPI, facecolor=BACKGROUND)
    plt.close(fig)
    return True


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    data, out = sys.argv[1], sys.argv[2]
    variables = {}
    if os.path.exists(os.path.join(data, "variables.json")):
        with open(os.path.join(data, "variables.json"), encoding="utf-8") as f:
            variables = json.load(f)
    os.makedirs(out, exist_ok=True)
    drawn = 0
    for dashboard_dir in sorted(glob.glob(os.path.join(data, "*", ""))):
        name = os.path.basename(os.path.normpath(dashboard_dir))
        path = os.path.join(out, f"{name}.png")
        if render(dashboard_dir, path, variables):
            print(f"{path}: {os.path.getsize(path) // 1024} KiB")
            drawn += 1
    if drawn == 0:
        print(f"no panel data under {data}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
