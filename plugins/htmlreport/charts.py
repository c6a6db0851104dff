"""The HTML report's charts, drawn here as inline SVG: bars, the time budget, time series.

Every chart scales with the page (a ``viewBox``), so nothing is cut at an 800 px window.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from urllib.parse import quote

from perfstack.analysis.views.budget import Budget
from perfstack.report import Report
from perfstack.report.encode import utf8_safe

from ..artifacts import TIMELINE, locate, read_nvml

LAYER_COLOURS = {"python": "#4e79a7", "module": "#b07aa1", "framework": "#f28e2b",
                 "kernel": "#e15759", "hardware": "#76b7b2", "run": "#bab0ac"}
#: Budget parts drawn in the bar, each its own colour (the legend names them).
PART_COLOURS = {"startup": "#9c755f", "interpreter": "#4e79a7", "native": "#f28e2b",
                "framework": "#f28e2b", "kernels": "#e15759", "openmp": "#ff9da7",
                "os": "#76b7b2", "runtime": "#59a14f", "other": "#edc948", "idle": "#bab0ac"}


def esc(text: object) -> str:
    """Escape a workload-derived string for HTML text and attribute values; the undecodable
    bytes of a file name (``\udce9``) are shown as ``\xe9``, never an encoding error."""
    return html.escape(utf8_safe(str(text)), quote=True)


#: A URL scheme (``javascript:``, ``data:``, ``file:``...) at the start of a link.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def file_href(path: str) -> str | None:
    """Return a link to a local file, given its path relative to the page, as a relative URL
    that a browser can only read as a path, or None where the path is no plain relative
    path (a scheme such as ``javascript:``, a network path): a report is a file people pass
    around, and its paths are the workload's or a stranger's words, never a script to run."""
    if not path or _SCHEME.match(path) or path.startswith(("//", "\\")) or "\0" in path:
        return None
    if os.path.isabs(path):
        return None
    # ':' '?' '#' '%' become %-escapes; a file name's undecodable bytes, their own
    quoted = quote(os.fsencode(path.replace(os.sep, "/")), safe="/")
    return quoted if quoted.startswith(("./", "../")) else "./" + quoted


def short_label(label: str, room: int = 64) -> str:
    """A bar's label in ``room`` characters, its name whole: 'aten::bmm [[8, 512, ...' or
    'one_batch (…/models/train.py:42)' (the file cut from the left, its line kept)."""
    if len(label) <= room:
        return label
    name, sep, where = label.partition(" (")
    if sep and where.endswith(")") and len(name) + 5 < room:
        return f"{name} (…{where[-(room - len(name) - 4):]}"
    return label[:room - 1] + "…"


def bar_chart(chart_id: str, items: list[tuple[str, float, str]], colour: str) -> str:
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
        short = short_label(label)
        parts.append(f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end">'
                     f'<title>{esc(label)}</title>{esc(short)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h - 4}" '
                     f'fill="{colour}"><title>{esc(label)}: {esc(shown)}</title></rect>')
        parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + 13}">{esc(shown)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def budget_bar(budget: Budget) -> str:
    """The main thread's wall time as one stacked bar, with a legend naming every part."""
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
    return "".join(bar) + '<p class="legend">' + "".join(legend) + "</p>"


def timeseries(report: Report, base: Path | None) -> str:
    """Sampled GPU power and utilisation over time, one line chart per GPU and figure."""
    head = '<section id="timeseries"><h2>GPU power and utilisation over time</h2>'
    path, why = locate(report, base, None, TIMELINE)
    if path is None:
        why = why or "no GPU power or utilisation samples in this report"
        return head + f'<p class="muted" id="timeseries-empty">{esc(why)}</p></section>'
    _, samples = read_nvml(path)
    series: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        for field, unit in (("power_w", "W"), ("util_gpu", "%")):
            if s.get(field) is not None:
                series.setdefault(f"GPU {s.get('gpu')} {field} ({unit})", []).append(
                    (float(s["t"]), float(s[field])))
    if not series:
        return head + ('<p class="muted" id="timeseries-empty">no power or utilisation values '
                       "in the samples</p></section>")
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


