"""The ``html`` format: one self-contained page that works offline.

``perfstack show report.json --format html -o report.html`` (and ``perfstack run --html``):
findings first, the header and environment, the backend table, the time budget as a stacked
bar, top ops and top functions as bar charts, a flame graph of the Python stacks (py-spy's
profile, when its run folder is still beside the report), NVML power and utilisation over time
when sampled, the metrics, and each layer's top rows.

Charts are inline SVG drawn here; the only script marks the page ready and records any script
error in ``data-errors`` (the browser test reads both). Every string that comes from the
workload (function, op, file and thread names, its output) is escaped with ``html.escape``.
"""

from __future__ import annotations

import html
from typing import Any

from perfstack import hookimpl
from perfstack.analysis.budget import drill_down, hardware_beside, time_budget
from perfstack.render import Renderer, RenderOptions
from perfstack.report import Layer, Report, Row
from perfstack.units import fmt_quantity, fmt_seconds, fmt_value

from .artifacts import artifact, iter_tree, read_nvml, read_speedscope, walk_tree

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:16px;color:#222}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid #ccc}
code,.mono{font-family:ui-monospace,monospace;font-size:12px}
table{border-collapse:collapse;margin:4px 0 12px}td,th{border:1px solid #ddd;padding:3px 6px;
text-align:left;vertical-align:top}th{background:#f4f4f4}td.num{text-align:right}
.finding{border-left:5px solid #888;padding:4px 10px;margin:6px 0;background:#fafafa}
.critical{border-color:#c00}.warning{border-color:#e90}.info{border-color:#39c}
.status-ok{color:#070}.status-failed,.status-crashed,.status-timeout{color:#c00}
.status-unavailable{color:#a60}.muted{color:#777}svg text{font:11px system-ui,sans-serif}
ul.tree{list-style:none;padding-left:18px}ul.tree li{margin:2px 0}
"""
SCRIPT = """
(function(){var errors=[];window.addEventListener('error',function(e){errors.push(String(
e.message));document.body.setAttribute('data-errors',errors.join(' | '));});
window.addEventListener('load',function(){var n=document.querySelectorAll('svg.chart').length;
document.body.setAttribute('data-charts',String(n));document.body.setAttribute('data-ready','1');
});})();
"""
LAYER_COLOURS = {"python": "#4e79a7", "framework": "#f28e2b", "kernel": "#e15759",
                 "hardware": "#76b7b2", "run": "#bab0ac"}


def esc(text: object) -> str:
    """Escape a workload-derived string for HTML text and attribute values."""
    return html.escape(str(text), quote=True)


def _table(head: list[str], rows: list[list[str]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    out = ["<table><tr>", *[f"<th>{esc(h)}</th>" for h in head], "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(
            f"<td class=\"num\">{c}</td>" if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _bar_chart(chart_id: str, items: list[tuple[str, float, str]], unit: str,
               colour: str) -> str:
    """Horizontal bars: (label, value, shown value)."""
    if not items:
        return f'<p class="muted" id="{chart_id}-empty">nothing measured</p>'
    width, label_w, bar_h = 1000, 420, 18
    top = max(v for _, v, _ in items) or 1.0
    height = bar_h * len(items) + 4
    parts = [f'<svg class="chart" id="{chart_id}" width="{width}" height="{height}" '
             f'role="img" aria-label="{esc(chart_id)}">']
    for i, (label, value, shown) in enumerate(items):
        y = i * bar_h + 2
        w = max(1.0, (width - label_w - 90) * value / top)
        short = label if len(label) <= 64 else label[:61] + "..."
        parts.append(f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end">'
                     f'<title>{esc(label)}</title>{esc(short)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h - 4}" '
                     f'fill="{colour}"><title>{esc(label)}: {esc(shown)}</title></rect>')
        parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + 13}">{esc(shown)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _header(report: Report) -> str:
    run = report.run
    env = report.environment
    def block(name: str) -> dict[str, Any]:
        value = env.get(name)
        return value if isinstance(value, dict) else {}

    py, torch, cpu = block("python"), block("torch"), block("cpu")
    facts = [f"Python {py.get('version', '?')} ({py.get('implementation', '?')})",
             f"torch {torch.get('version')}" if torch.get("version") else "no torch",
             f"{cpu.get('model', '?')}, {cpu.get('logical_cpus', '?')} CPUs",
             f"perfstack {run.perfstack_version}", f"started {run.started}",
             f"{fmt_seconds(run.duration_s)} in all, {len(run.runs)} runs"]
    wall = report.metric("wall_time")
    if wall is not None and wall.value is not None:
        facts.append(f"baseline median {fmt_seconds(float(wall.value))} "
                     f"(n={len(wall.samples or [])})")
    bad = [r for r in run.runs if not r.exit.clean]
    state = ("<p class=\"status-failed\">" + "<br>".join(
        f"run {esc(r.id)}: {esc(r.exit.describe())}" for r in bad) + "</p>") if bad else \
        '<p class="status-ok">every run exited 0</p>'
    if not run.complete:
        state += '<p class="status-failed"><b>INTERRUPTED: this report is partial</b></p>'
    return (f'<header id="header"><h1>perfstack report</h1><p class="mono">$ '
            f'{esc(" ".join(run.command))}</p><p>{esc(" · ".join(facts))}</p>{state}</header>')


def _findings(report: Report) -> str:
    if not report.findings:
        return '<section id="findings"><h2>Findings</h2><p>none</p></section>'
    order = {"critical": 0, "warning": 1, "info": 2}
    parts = ['<section id="findings"><h2>Findings</h2>']
    for f in sorted(report.findings, key=lambda f: order.get(f.severity, 3)):
        sev = f.severity if f.severity in order else "info"
        evidence = "".join(f"<li>{esc(e)}</li>" for e in f.evidence)
        parts.append(f'<div class="finding {sev}"><b>[{esc(f.severity)}] {esc(f.title)}</b> '
                     f'<span class="muted">({esc(f.layer)}, {esc(f.rule)}, from '
                     f'{esc(f.source)})</span><ul>{evidence}</ul><i>→ {esc(f.action)}</i></div>')
    parts.append("</section>")
    return "".join(parts)


def _backends(report: Report) -> str:
    rows = []
    for b in report.backends:
        overhead = (f"{b.overhead.ratio:.2f}x (n={b.overhead.baseline_n})" if b.overhead
                    else b.overhead_note or "-")
        notes = [n for n in (b.reason, f"fix: {b.fix}" if b.fix else None) if n] + b.notes
        rows.append([esc(b.name), f'<span class="status-{esc(b.status.value)}">'
                     f"{esc(b.status.value)}</span>", esc(",".join(b.layers) or "-"),
                     esc(fmt_seconds(b.wall_s) if b.wall_s is not None else "-"),
                     esc(overhead), "<br>".join(esc(n) for n in notes)])
    return ('<section id="backends"><h2>Backends</h2>'
            + _table(["backend", "status", "layers", "wall", "overhead", "notes"], rows)
            + "</section>")


def _budget(report: Report) -> str:
    budget = time_budget(report)
    head = '<section id="budget"><h2>Where the time goes</h2>'
    if not budget.lines:
        return head + ('<p class="muted" id="budget-empty">no backend measured a time budget '
                       '(pyspy and perftop do)</p></section>')
    width, x = 1000, 0.0
    bar = [f'<svg class="chart" id="budget-chart" width="{width}" height="34" role="img" '
           'aria-label="time budget">']
    for line in budget.lines:
        if line.depth or line.part in ("gil_wait", "gpu_kernels"):
            continue  # subdivisions, and parts running beside the main thread
        if line.seconds is None and budget.wall_s is not None:
            continue  # a share of native CPU time (no wall-time split measured), not of wall
        w = width * line.share / 100
        bar.append(f'<rect x="{x:.1f}" y="2" width="{w:.1f}" height="30" '
                   f'fill="{LAYER_COLOURS.get(line.layer, "#999")}" stroke="#fff">'
                   f"<title>{esc(line.title)}: {line.share:.1f}% ({esc(line.source)})</title>"
                   "</rect>")
        if w > 60:
            bar.append(f'<text x="{x + 4:.1f}" y="21" fill="#fff">{esc(line.part)} '
                       f"{line.share:.0f}%</text>")
        x += w
    bar.append("</svg>")
    rows = [[("&nbsp;&nbsp;└ " if ln.depth else "") + esc(ln.title), esc(ln.layer),
             f"{ln.share:.1f}%", esc(fmt_seconds(ln.seconds) if ln.seconds is not None
                                     else "-"), esc(ln.source)] for ln in budget.lines]
    notes = "".join(f'<p class="muted">{esc(n)}</p>' for n in budget.notes)
    return (head + "".join(bar) + _table(["part", "layer", "share", "seconds", "measured by"],
                                         rows, {2, 3}) + notes + "</section>")


def _value(row: Row, names: tuple[str, ...]) -> tuple[float, str]:
    for name in names:
        q = row.values.get(name)
        if q is not None and q.value is not None:
            return float(q.value), fmt_quantity(q)
    return 0.0, "-"


def _top_charts(report: Report, top: int) -> str:
    ops = [r for r in report.layers.get(Layer.FRAMEWORK, []) if "self" in r.values]
    op_items = sorted(((r.name, *_value(r, ("self", "total"))) for r in ops),
                      key=lambda t: -t[1])[:top]
    funcs = [r for r in report.layers.get(Layer.PYTHON, [])
             if r.attrs.get("kind") is None and "self_time" in r.values]
    fn_items = sorted(((r.name, *_value(r, ("self_time",))) for r in funcs),
                      key=lambda t: -t[1])[:top]
    return ('<section id="top"><h2>Top torch ops (self CPU time, profiled steps)</h2>'
            + _bar_chart("top-ops", op_items, "s", LAYER_COLOURS["framework"])
            + "<h2>Top Python functions (own sampled time)</h2>"
            + _bar_chart("top-functions", fn_items, "s", LAYER_COLOURS["python"])
            + "</section>")


def _drill(report: Report, options: RenderOptions) -> str:
    nodes, notes = drill_down(report, top=min(options.top, 8), depth=options.depth)
    if not nodes:
        return ""

    def item(node: Any) -> str:
        kids = "".join(item(c) for c in node.children)
        return (f"<li><span class=\"mono\">{esc(node.label)}</span> <span class=\"muted\">"
                f"{esc(node.figures)} [{esc(node.source)}]</span>"
                + (f'<ul class="tree">{kids}</ul>' if kids else "") + "</li>")

    beside = hardware_beside(report)
    return ('<section id="drill-down"><h2>Drill-down: functions → ops → kernels</h2>'
            + (f"<p>hardware: {esc('; '.join(beside))}</p>" if beside else "")
            + '<ul class="tree">' + "".join(item(n) for n in nodes) + "</ul>"
            + "".join(f'<p class="muted">{esc(n)}</p>' for n in notes) + "</section>")


def _flamegraph(report: Report, options: RenderOptions) -> str:
    head = '<section id="flame"><h2>Flame graph of the Python stacks</h2>'
    path = artifact(report, options.report_dir, "pyspy", "speedscope")
    if path is None:
        return head + ('<p class="muted" id="flamegraph-empty">no py-spy profile beside this '
                       'report (run with --plugins pyspy)</p></section>')
    try:
        tree = walk_tree(read_speedscope(path))
    except (OSError, ValueError, KeyError) as exc:
        return head + f'<p class="muted">the py-spy profile could not be read: {esc(exc)}</p>' \
            "</section>"
    total = tree["value"] or 1.0
    width, row_h, min_w = 1180, 17, 0.8
    cells = []
    depth_max = 0
    for node, depth, start in iter_tree(tree):
        w = width * node["value"] / total
        if w < min_w:
            continue
        depth_max = max(depth_max, depth)
        x = width * start / total
        name = str(node["name"])
        hue = 10 + (sum(map(ord, name)) % 50)
        label = name if w > 7 * len(name) else name[: max(0, int(w / 7) - 2)] + ".." \
            if w > 30 else ""
        cells.append((depth, f'<g><rect x="{x:.1f}" y="{{y{depth}}}" width="{w:.1f}" '
                      f'height="{row_h - 1}" fill="hsl({hue},80%,60%)"><title>{esc(name)}: '
                      f'{fmt_seconds(node["value"])} ({100 * node["value"] / total:.1f}%)'
                      f'</title></rect><text x="{x + 3:.1f}" y="{{t{depth}}}">{esc(label)}'
                      "</text></g>"))
    height = (depth_max + 1) * row_h
    svg = [f'<svg class="chart" id="flamegraph" width="{width}" height="{height}" role="img" '
           'aria-label="flame graph">']
    for depth, cell in cells:
        y = depth * row_h  # root on top (an icicle): callers above callees
        svg.append(cell.replace(f"{{y{depth}}}", str(y)).replace(f"{{t{depth}}}",
                                                                   str(y + 12)))
    svg.append("</svg>")
    return (head + f'<p class="muted">{fmt_seconds(tree["value"])} of samples, all threads; '
            "callers above callees, width is time; hover for names</p>" + "".join(svg)
            + "</section>")


def _timeseries(report: Report, options: RenderOptions) -> str:
    head = '<section id="timeseries"><h2>GPU power and utilisation over time</h2>'
    path = artifact(report, options.report_dir, "nvml", "timeline")
    if path is None:
        return head + ('<p class="muted" id="timeseries-empty">no NVML samples in this report'
                       "</p></section>")
    _, samples = read_nvml(path)
    series: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        for field, unit in (("power_w", "W"), ("util_gpu", "%")):
            if s.get(field) is not None:
                series.setdefault(f"GPU {s.get('gpu')} {field} ({unit})", []).append(
                    (float(s["t"]), float(s[field])))
    if not series:
        return head + '<p class="muted" id="timeseries-empty">no NVML values</p></section>'
    parts = [head]
    for i, (name, points) in enumerate(series.items()):
        width, height = 1000, 120
        t_max = max(t for t, _ in points) or 1.0
        v_max = max(v for _, v in points) or 1.0
        path_d = " ".join(f"{'M' if j == 0 else 'L'}{50 + (width - 60) * t / t_max:.1f},"
                          f"{height - 20 - (height - 30) * v / v_max:.1f}"
                          for j, (t, v) in enumerate(points))
        parts.append(f'<svg class="chart" id="timeseries-{i}" width="{width}" height="{height}"'
                     f' role="img" aria-label="{esc(name)}"><text x="50" y="12">{esc(name)}, '
                     f"max {v_max:.0f}</text><path d=\"{path_d}\" fill=\"none\" "
                     f'stroke="#e15759" stroke-width="1.5"/><text x="50" y="{height - 4}">0 s'
                     f'</text><text x="{width - 60}" y="{height - 4}">{t_max:.1f} s</text>'
                     "</svg>")
    return "".join(parts) + "</section>"


def _metrics(report: Report) -> str:
    rows = [[esc(m.name), esc(fmt_value(m.value, m.unit, m.reason)), esc(m.layer),
             esc(m.source), esc(m.better.value), str(len(m.samples or []) or "-")]
            for m in report.metrics]
    return ('<section id="metrics"><h2>Metrics</h2>'
            + _table(["metric", "value", "layer", "source", "better", "n"], rows, {1, 5})
            + "</section>")


def _layers(report: Report, top: int) -> str:
    parts = ['<section id="layers">']
    for layer in Layer:
        rows = report.layers.get(layer, [])
        parts.append(f'<h2 id="layer-{layer.value}">{esc(layer.value.title())} layer</h2>')
        if not rows:
            parts.append('<p class="muted">no rows</p>')
            continue
        by_source: dict[str, list[Row]] = {}
        for row in rows:
            by_source.setdefault(row.source, []).append(row)
        for source, group in by_source.items():
            cols = list(dict.fromkeys(k for r in group[:top] for k in r.values))
            body = [[esc(r.name), *[esc(fmt_quantity(r.values[c])) if c in r.values else "-"
                                    for c in cols]] for r in group[:top]]
            parts.append(f"<h3>from {esc(source)} ({len(group)} rows)</h3>"
                         + _table(["name", *cols], body, set(range(1, len(cols) + 1))))
    parts.append("</section>")
    return "".join(parts)


class HtmlRenderer(Renderer):
    """One self-contained HTML page: charts as inline SVG, no network."""

    name = "html"
    description = "one self-contained HTML page with charts and a flame graph (works offline)"
    output_file_extension = ".html"

    def render(self, report: Report, options: RenderOptions) -> str:
        """Return the report as an HTML document."""
        title = esc("perfstack: " + " ".join(report.run.command))
        body = "".join([
            _header(report), _findings(report), _backends(report), _budget(report),
            _drill(report, options), _top_charts(report, options.top),
            _flamegraph(report, options), _timeseries(report, options), _metrics(report),
            _layers(report, options.top)])
        return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
                f'<meta name="viewport" content="width=device-width">'
                f"<title>{title}</title><style>{CSS}</style></head><body>{body}"
                f"<script>{SCRIPT}</script></body></html>\n")


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    """Provide the html renderer."""
    return [HtmlRenderer()]
