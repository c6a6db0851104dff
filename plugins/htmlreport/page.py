"""The HTML report's overview pane and the page around the panes, from the view.

Every figure here comes from ``perfstack.analysis.view`` and is worded by
``perfstack.render.words``, as in the text and markdown reports. Workload strings are
escaped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from perfstack.analysis.view import View
from perfstack.analysis.views.drilldown import Node
from perfstack.render.words.common import (
    STATUS_WORDS,
    answer_lines,
    beside_line,
    by_whom,
    command_line,
    fmt_overhead,
    node_figures,
    printed_caption,
    related_line,
    related_title,
    wall_line,
)
from perfstack.report.units import fmt_seconds, fmt_value

from .charts import LAYER_COLOURS, bar_chart, budget_bar, esc, file_href
from .grid import table


def header(view: View) -> str:
    """What ran, where, how the runs ended, and what the median run printed."""
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
    return (f'<header id="header"><h1>perfstack report</h1><p class="mono">'
            f'{esc(command_line(h))}</p><p>{esc(" · ".join(h.facts))}<br>'
            f"{esc(wall_line(h))}</p>{state}{printed}</header>")


def answer(view: View) -> str:
    """The headline: what bounds the workload, its own hottest function, the top finding."""
    return ('<section id="answer"><h2>Answer</h2><p class="answer">'
            + " ".join(esc(line) for line in answer_lines(view)) + "</p></section>")


def findings(view: View) -> str:
    """Every finding with its evidence and what to do, most severe first."""
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


def budget(view: View) -> str:
    """Where the time goes: the bar with its legend, the table, related figures."""
    b = view.budget
    head = '<section id="budget"><h2>Where the time goes</h2>'
    if not b.lines and view.device is not None:
        return ""  # the device's breakdown is the budget there is
    if not b.lines:
        return head + ('<p class="muted" id="budget-empty">no backend measured a time budget'
                       f'{esc(by_whom(b.measured_by))}</p></section>')
    rows = [[("&nbsp;&nbsp;└ " if ln.depth else "") + esc(ln.title), f"{ln.share:.1f}%",
             esc(fmt_seconds(ln.seconds) if ln.seconds is not None else "-"),
             esc(ln.source)] for ln in b.lines]
    notes = "".join(f'<p class="muted">{esc(n)}</p>' for n in b.notes)
    related = ""
    for group, metrics in view.related.items():
        items = "".join(f"<li>{esc(related_line(m, True).strip())}</li>" for m in metrics)
        related += (f'<p id="related-{esc(group)}">{esc(related_title(group, metrics))}:'
                    f"</p><ul>{items}</ul>")
    return (head + budget_bar(b) + table(["part", "share", "time", "measured by"], rows,
                                          {1, 2}) + notes + related + "</section>")


def _ops_link(node: Node) -> str:
    """A function's link to its ops in the Ops pane (the ops table's "called from")."""
    if node.layer != "python" or not any(c.layer == "framework" for c in node.children):
        return ""
    # The ops table names callers as torch's stack does: the function's own name (not
    # py-spy's qualified main.<locals>.step) and its place.
    function, _, where = node.label.partition(" (")
    function = function.split(".")[-1] + (f" ({where}" if where else "")
    return (f' <a href="#pane-ops" data-pane="pane-ops" data-table="" '
            f'data-filter="{esc(function)}" class="ops-link">its ops</a>')


def drill_down(view: View) -> str:
    """Your functions first, then torch ops, then kernels: collapsible, first level open."""
    if not view.tree and not view.tree_notes:
        return ""

    def item(node: Node, depth: int) -> str:
        line = (f'<span class="mono">{esc(node.label)}</span> <span class="fig">'
                f"{esc(node_figures(node))} [{esc(node.source)}]</span>{_ops_link(node)}")
        if not node.children:
            return f"<li>{line}</li>"
        kids = "".join(item(c, depth + 1) for c in node.children)
        return (f"<li><details{' open' if depth == 0 else ''}><summary>{line}</summary>"
                f'<ul class="tree">{kids}</ul></details></li>')

    return ('<section id="drill-down"><h2>Drill-down: your functions first → torch ops → '
            "kernels</h2>"
            + (f"<p>hardware: {esc(beside_line(view.beside))}</p>" if view.beside else "")
            + '<ul class="tree">' + "".join(item(n, 0) for n in view.tree) + "</ul>"
            + "".join(f'<p class="muted">{esc(n)}</p>' for n in view.tree_notes)
            + "</section>")


def top_functions(view: View) -> str:
    """The drill-down's functions as bars: the same rows, filtered the same way."""
    items = [(n.label, n.seconds, node_figures(n)) for n in view.tree if n.seconds is not None]
    return ('<section id="top"><h2>Your functions, then libraries</h2>'
            + bar_chart("top-functions", items, LAYER_COLOURS["python"]) + "</section>")


def backends(view: View) -> str:
    """Each backend in one line; reasons as numbered notes, once."""
    rows = [[esc(b.name), f'<span class="status-{esc(b.status)}">'
             f"{esc(STATUS_WORDS.get(b.status, b.status))}</span>",
             esc(", ".join(b.layers) or "-"),
             esc(fmt_seconds(b.wall_s) if b.wall_s is not None else "-"),
             esc(fmt_overhead(b.overhead, b.overhead_noise)),
             "".join(f'<a href="#note-{n}">[{n}]</a>' for n in b.notes)] for b in view.backends]
    notes = "".join(f'<li id="note-{i}">{esc(note)}</li>'
                    for i, note in enumerate(view.footnotes, 1))
    return ('<section id="backends"><h2>Backends</h2>'
            + table(["backend", "status", "layers", "wall", "overhead", "notes"], rows)
            + (f'<ol class="muted">{notes}</ol>' if notes else "") + "</section>")


def metrics(view: View) -> str:
    """Every metric, folded: a table the page's script fills from :func:`metrics_table`, a
    page of rows at a time (a job's thousands of per-rank figures are no burden on the page's
    first draw)."""
    return ('<section id="metrics"><h2>Metrics</h2><details><summary>'
            f"{len(view.metrics)} metrics</summary>"
            '<div class="table" id="table-metrics"></div></details></section>')


def metrics_table(view: View) -> dict[str, Any]:
    """The Metrics table's data, as the page's script reads a table: its columns and a row a
    metric (the value sorts by number, shows as the text report writes it)."""
    return {"id": "metrics", "title": "metrics", "sort": -1, "notes": [], "source": "report",
            "columns": [{"title": "metric"}, {"title": "value", "num": True},
                        {"title": "layer"}, {"title": "source"}, {"title": "better"},
                        {"title": "n", "num": True}],
            "rows": [{"c": [m.name, [m.value if isinstance(m.value, (int, float)) else None,
                                     fmt_value(m.value, m.unit, m.reason)],
                            m.layer, m.source, m.better.value,
                            [len(m.samples or []) or 1, str(len(m.samples or []) or 1)]],
                      "k": f"{m.name} {m.source}"} for m in view.metrics]}


def artifacts(view: View, report_dir: Path | None, page_dir: Path | None) -> str:
    """The raw outputs, each a link (relative to the page) and what opens it."""
    if not view.artifacts:
        return ""
    items = []
    for a in view.artifacts:
        target = Path(a.path)
        href = None
        if report_dir is not None and file_href(a.path.lstrip("/")) is not None:
            absolute = target if target.is_absolute() else Path.cwd() / target
            href = file_href(os.path.relpath(absolute, page_dir or report_dir))
        link = (f'<a href="{esc(href)}"><code>{esc(a.path)}</code></a>' if href
                else f"<code>{esc(a.path)}</code>")
        items.append(f"<li>{esc(a.backend)} {esc(a.label)}: {link}"
                     + (f" — open with {esc(a.opener)}" if a.opener else "") + "</li>")
    return f'<section id="artifacts"><h2>Raw outputs</h2><ul>{"".join(items)}</ul></section>'
