"""The ``html`` format: one self-contained page that works offline.

``perfstack show report.json --format html -o report.html`` (and ``perfstack run --html``).
The page draws every figure from the same view as the text and markdown reports
(``perfstack.analysis.view``) and says it in the same words (``perfstack.render.words``): the
answer, the findings, where the time goes (a stacked bar with a legend), the drill-down and its
top functions, top torch ops, a flame graph of the Python stacks (py-spy's profile, when its
run folder is still beside the report), NVML power and utilisation over time when sampled,
each layer's top rows, the backends in one line each, the metrics and the raw outputs.

Charts are inline SVG drawn here; the only script marks the page ready and records any script
error in ``data-errors`` (the browser test reads both). Every string that comes from the
workload (function, op, file and thread names, its output) is escaped with ``html.escape``.
"""

from __future__ import annotations

import html

from perfstack import hookimpl
from perfstack.analysis.budget import Node
from perfstack.analysis.view import LayerTable, View, build
from perfstack.render import Renderer, RenderOptions
from perfstack.render.words import (
    LAYER_TITLES,
    STATUS_WORDS,
    answer_lines,
    beside_line,
    fmt_overhead,
    node_figures,
    printed_caption,
    related_line,
    related_title,
    wall_line,
)
from perfstack.report import Report
from perfstack.units import fmt_seconds, fmt_value

from .artifacts import artifact, iter_tree, read_nvml, read_speedscope, walk_tree

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:16px;color:#222}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid #ccc}
code,.mono,pre{font-family:ui-monospace,monospace;font-size:12px}
table{border-collapse:collapse;margin:4px 0 12px}td,th{border:1px solid #ddd;padding:3px 6px;
text-align:left;vertical-align:top}th{background:#f4f4f4}td.num{text-align:right}
.answer{font-size:15px;background:#f6f8fa;padding:8px 12px;border-radius:4px}
.finding{border-left:5px solid #888;padding:4px 10px;margin:6px 0;background:#fafafa}
.critical{border-color:#c00}.warning{border-color:#e90}.info{border-color:#39c}
.status-ok{color:#070}.status-failed,.status-crashed,.status-timeout{color:#c00}
.status-unavailable,.status-partial{color:#a60}.muted{color:#777}
svg.chart{max-width:100%;height:auto}svg text{font:11px system-ui,sans-serif}
ul.tree{list-style:none;padding-left:18px}ul.tree li{margin:2px 0}
.legend span{display:inline-block;margin-right:14px}.swatch{display:inline-block;width:10px;
height:10px;margin-right:4px;vertical-align:baseline}
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
#: Budget parts drawn in the bar, each its own colour (the legend names them).
PART_COLOURS = {"startup": "#9c755f", "interpreter": "#4e79a7", "native": "#f28e2b",
                "framework": "#f28e2b", "kernels": "#e15759", "openmp": "#ff9da7",
                "os": "#76b7b2", "runtime": "#59a14f", "other": "#edc948", "idle": "#bab0ac"}


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


def _details(summary: str, body: str, open_: bool = False) -> str:
    return (f"<details{' open' if open_ else ''}><summary>{summary}</summary>{body}"
            "</details>")


def _bar_chart(chart_id: str, items: list[tuple[str, float, str]], colour: str) -> str:
    """Horizontal bars: (label, value, shown value); scales with the page (viewBox)."""
    if not items:
        return f'<p class="muted" id="{chart_id}-empty">nothing measured</p>'
    width, label_w, bar_h = 1000, 420, 18
    top = max(v for _, v, _ in items) or 1.0
    height = bar_h * len(items) + 4
    parts = [f'<svg class="chart" id="{chart_id}" viewBox="0 0 {width} {height}" '
             f'width="{width}" height="{height}" role="img" aria-label="{esc(chart_id)}">']
    for i, (label, value, shown) in enumerate(items):
        y = i * bar_h + 2
        w = max(1.0, (width - label_w - 200) * value / top)
        short = label if len(label) <= 64 else "…" + label[-63:]  # keep the function and line
        parts.append(f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end">'
                     f'<title>{esc(label)}</title>{esc(short)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h - 4}" '
                     f'fill="{colour}"><title>{esc(label)}: {esc(shown)}</title></rect>')
        parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + 13}">{esc(shown)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _header(view: View) -> str:
    h = view.header
    state = ""
    if h.failures:
        state = ('<p class="status-failed">' + "<br>".join(
            f"run {esc(run_id)}: {esc(ended)}" for run_id, ended in h.failures) + "</p>")
    if not h.complete:
        state += '<p class="status-failed"><b>INTERRUPTED: this report is partial</b></p>'
    printed = ""
    if h.printed:
        printed = (f'<p class="muted">{esc(printed_caption(h))}</p><pre>'
                   + esc("\n".join(h.printed)) + "</pre>")
    return (f'<header id="header"><h1>perfstack report</h1><p class="mono">$ '
            f'{esc(" ".join(h.command))}</p><p>{esc(" · ".join(h.facts))}<br>'
            f"{esc(wall_line(h))}</p>{state}{printed}</header>")


def _answer(view: View) -> str:
    return ('<section id="answer"><h2>Answer</h2><p class="answer">'
            + " ".join(esc(line) for line in answer_lines(view)) + "</p></section>")


def _findings(view: View) -> str:
    if not view.findings:
        return '<section id="findings"><h2>Findings</h2><p>none</p></section>'
    parts = [f'<section id="findings"><h2>Findings ({len(view.findings)})</h2>']
    for f in view.findings:
        sev = f.severity if f.severity in ("critical", "warning", "info") else "info"
        evidence = "".join(f"<li>{esc(e)}</li>" for e in f.evidence)
        parts.append(f'<div class="finding {sev}"><b>[{esc(f.severity)}] {esc(f.title)}</b> '
                     f'<span class="muted">({esc(f.layer)}, {esc(f.rule)}, from '
                     f'{esc(f.source)})</span><ul>{evidence}</ul><i>→ {esc(f.action)}</i></div>')
    parts.append("</section>")
    return "".join(parts)


def _budget(view: View) -> str:
    budget = view.budget
    head = '<section id="budget"><h2>Where the time goes</h2>'
    if not budget.lines:
        return head + ('<p class="muted" id="budget-empty">no backend measured a time budget '
                       '(pyspy and perftop do)</p></section>')
    width, x = 1000, 0.0
    bar = [f'<svg class="chart" id="budget-chart" viewBox="0 0 {width} 34" width="{width}" '
           'height="34" role="img" aria-label="time budget">']
    legend = []
    split = {ln.part for ln in budget.lines if ln.depth}
    for line in budget.lines:
        if line.part in ("gil_wait", "gpu_kernels"):
            continue  # running beside the main thread, not a piece of its time
        if line.part == "native" and split:
            continue  # drawn as its subdivisions
        if line.seconds is None and budget.wall_s is not None:
            continue  # a share of native CPU time (no wall-time split measured), not of wall
        colour = PART_COLOURS.get(line.part, LAYER_COLOURS.get(line.layer, "#999"))
        w = width * line.share / 100
        bar.append(f'<rect x="{x:.1f}" y="2" width="{w:.1f}" height="30" fill="{colour}" '
                   f'stroke="#fff"><title>{esc(line.title)}: {line.share:.1f}% '
                   f"({esc(line.source)})</title></rect>")
        if w > 60:
            bar.append(f'<text x="{x + 4:.1f}" y="21" fill="#fff">{esc(line.part)} '
                       f"{line.share:.0f}%</text>")
        legend.append(f'<span><i class="swatch" style="background:{colour}"></i>'
                      f"{esc(line.title)} {line.share:.1f}%</span>")
        x += w
    bar.append("</svg>")
    rows = [[("&nbsp;&nbsp;└ " if ln.depth else "") + esc(ln.title), f"{ln.share:.1f}%",
             esc(fmt_seconds(ln.seconds) if ln.seconds is not None else "-"),
             esc(ln.source)] for ln in budget.lines]
    notes = "".join(f'<p class="muted">{esc(n)}</p>' for n in budget.notes)
    related = ""
    for group, metrics in view.related.items():
        items = "".join(f"<li>{esc(related_line(m, True).strip())}</li>" for m in metrics)
        related += (f'<p id="related-{esc(group)}">{esc(related_title(group, metrics))}:'
                    f"</p><ul>{items}</ul>")
    return (head + "".join(bar) + '<p class="legend">' + "".join(legend) + "</p>"
            + _table(["part", "share", "time", "measured by"], rows, {1, 2}) + notes
            + related + "</section>")


def _tree(view: View) -> str:
    if not view.tree and not view.tree_notes:
        return ""

    def item(node: Node) -> str:
        kids = "".join(item(c) for c in node.children)
        return (f"<li><span class=\"mono\">{esc(node.label)}</span> <span class=\"muted\">"
                f"{esc(node_figures(node))} [{esc(node.source)}]</span>"
                + (f'<ul class="tree">{kids}</ul>' if kids else "") + "</li>")

    return ('<section id="drill-down"><h2>Drill-down: your functions first → torch ops → '
            "kernels</h2>"
            + (f"<p>hardware: {esc(beside_line(view.beside))}</p>" if view.beside else "")
            + '<ul class="tree">' + "".join(item(n) for n in view.tree) + "</ul>"
            + "".join(f'<p class="muted">{esc(n)}</p>' for n in view.tree_notes)
            + "</section>")


def _first_time(t: LayerTable) -> str | None:
    return next((c for c in t.columns if any(
        c in r.values and r.values[c].unit == "s" for r in t.rows)), None)


def _top_charts(view: View) -> str:
    """The drill-down's functions and the framework layer's top ops, as bars: the same rows,
    filtered the same way, as the text report shows."""
    fn_items = [(n.label, n.seconds, node_figures(n)) for n in view.tree
                if n.seconds is not None]
    op_items: list[tuple[str, float, str]] = []
    for t in view.layers.get("framework", []):
        column = _first_time(t)
        if column is None or op_items:
            continue
        for row, name in zip(t.rows, t.names, strict=True):
            q = row.values.get(column)
            if q is not None and isinstance(q.value, (int, float)):
                op_items.append((name, float(q.value),
                                 f"{fmt_value(q.value, q.unit)} {column} ({t.source})"))
    return ('<section id="top"><h2>Your functions (the drill-down\'s top level)</h2>'
            + _bar_chart("top-functions", fn_items, LAYER_COLOURS["python"])
            + "<h2>Top torch ops</h2>"
            + _bar_chart("top-ops", op_items, LAYER_COLOURS["framework"]) + "</section>")


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
    svg = [f'<svg class="chart" id="flamegraph" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" '
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
        parts.append(f'<svg class="chart" id="timeseries-{i}" viewBox="0 0 {width} {height}" '
                     f'width="{width}" height="{height}"'
                     f' role="img" aria-label="{esc(name)}"><text x="50" y="12">{esc(name)}, '
                     f"max {v_max:.0f}</text><path d=\"{path_d}\" fill=\"none\" "
                     f'stroke="#e15759" stroke-width="1.5"/><text x="50" y="{height - 4}">0 s'
                     f'</text><text x="{width - 60}" y="{height - 4}">{t_max:.1f} s</text>'
                     "</svg>")
    return "".join(parts) + "</section>"


def _layers(view: View, providers: dict[str, list[str]]) -> str:
    parts = ['<section id="layers"><h2>Layers</h2>']
    for layer, tables in view.layers.items():
        title = esc(LAYER_TITLES[layer])
        if not tables:
            feeds = providers.get(layer, [])
            hint = "nothing measured here" + (": filled by " + ", ".join(
                f"--plugins {p}" for p in feeds) if feeds else "")
            parts.append(f'<h3 id="layer-{layer}">{title}</h3><p class="muted">{esc(hint)}</p>')
            continue
        body = []
        for t in tables:
            folded = (f"; library code folded into {len(t.folded)} rows" if t.folded else "")
            rows = [[esc(name), *(esc(fmt_value(r.values[c].value, r.values[c].unit,
                                                r.values[c].reason)) if c in r.values else ""
                                  for c in t.columns)]
                    for r, name in zip(t.rows, t.names, strict=True)]
            body.append(f"<h4>from {esc(t.source)} ({t.total_rows} rows{folded})</h4>"
                        + _table(["name", *t.columns], rows, set(range(1, len(t.columns) + 1))))
            if t.unmeasured:
                body.append(f'<p class="muted">not measured here: {esc(", ".join(t.unmeasured))}'
                            + (f" ({esc(t.unmeasured_reason)})" if t.unmeasured_reason else "")
                            + "</p>")
        parts.append(f'<h3 id="layer-{layer}">{title}</h3>' + "".join(body))
    parts.append("</section>")
    return "".join(parts)


def _backends(view: View) -> str:
    rows = [[esc(b.name), f'<span class="status-{esc(b.status)}">'
             f"{esc(STATUS_WORDS.get(b.status, b.status))}</span>",
             esc(", ".join(b.layers) or "-"),
             esc(fmt_seconds(b.wall_s) if b.wall_s is not None else "-"),
             esc(fmt_overhead(b.overhead, b.overhead_noise)),
             "".join(f'<a href="#note-{n}">[{n}]</a>' for n in b.notes)] for b in view.backends]
    notes = "".join(f'<li id="note-{i}">{esc(note)}</li>'
                    for i, note in enumerate(view.footnotes, 1))
    return ('<section id="backends"><h2>Backends</h2>'
            + _table(["backend", "status", "layers", "wall", "overhead", "notes"], rows)
            + (f"<ol>{notes}</ol>" if notes else "") + "</section>")


def _metrics(view: View) -> str:
    rows = [[esc(m.name), esc(fmt_value(m.value, m.unit, m.reason)), esc(m.layer),
             esc(m.source), esc(m.better.value), str(len(m.samples or []) or 1)]
            for m in view.metrics]
    return ('<section id="metrics"><h2>Metrics</h2>' + _details(
        f"{len(view.metrics)} metrics", _table(["metric", "value", "layer", "source", "better",
                                                "n"], rows, {1, 5})) + "</section>")


def _artifacts(view: View) -> str:
    if not view.artifacts:
        return ""
    items = "".join(f"<li>{esc(a.backend)} {esc(a.label)}: <code>{esc(a.path)}</code>"
                    + (f" — open with {esc(a.opener)}" if a.opener else "") + "</li>"
                    for a in view.artifacts)
    return f'<section id="artifacts"><h2>Raw outputs</h2><ul>{items}</ul></section>'


class HtmlRenderer(Renderer):
    """One self-contained HTML page: charts as inline SVG, no network."""

    name = "html"
    description = "one self-contained HTML page with charts and a flame graph (works offline)"
    output_file_extension = ".html"

    def render(self, report: Report, options: RenderOptions) -> str:
        """Return the report as an HTML document: the full view (every metric, every
        finding's evidence), the same figures as the text and markdown reports."""
        view = build(report, top=options.top, depth=options.depth, full=True,
                     all_frames=options.all_frames, report_dir=options.report_dir)
        title = esc("perfstack: " + " ".join(report.run.command))
        body = "".join([
            _header(view), _answer(view), _findings(view), _budget(view), _tree(view),
            _top_charts(view), _flamegraph(report, options), _timeseries(report, options),
            _layers(view, options.layer_providers), _backends(view), _metrics(view),
            _artifacts(view)])
        return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
                f'<meta name="viewport" content="width=device-width">'
                f"<title>{title}</title><style>{CSS}</style></head><body>{body}"
                f"<script>{SCRIPT}</script></body></html>\n")


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    """Provide the html renderer."""
    return [HtmlRenderer()]
