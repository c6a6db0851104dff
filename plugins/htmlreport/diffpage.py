"""``perfstack diff A B --format html``: the comparison as panes, with the verdicts and the noise.

The Overview holds the headline, the environment, the machine's drift and every metric with
its verdict; each layer's pane holds its changed rows (both sides, the change, the change with
the machine's drift taken out, the verdict), sortable and searchable like a report's tables.
The words are the text and markdown diff's (``perfstack.render.diff``).
"""

from __future__ import annotations

from typing import Any

from perfstack.analysis.diff import Diff
from perfstack.analysis.diff.rows import RowChange
from perfstack.plugin.renderer import RenderOptions
from perfstack.render.diff import (
    busy_line,
    changed_line,
    environment_lines,
    explain_cells,
    explain_rows,
    fmt_change,
    folded_line,
    headline,
    payback_line,
    row_verdict,
)
from perfstack.report.units import fmt_value

from .charts import esc

PANES = {"python": ("pane-python", "Python"), "module": ("pane-modules", "Modules"),
         "framework": ("pane-ops", "Ops"),
         "kernel": ("pane-kernels", "Kernels"), "hardware": ("pane-hardware", "Hardware"),
         "memory": ("pane-memory", "Memory")}


def _num(value: float | None, unit: str) -> list[Any]:
    return [value, fmt_value(value, unit) if value is not None else ""]


def _change(change: float | None) -> list[Any]:
    return [change, fmt_change(change)]


NUM_CELL = '<td class="num">'


def _moved(r: RowChange) -> float | None:
    """How far a row moved: the change of its value, or all of it for a row on one side."""
    if r.delta is not None:
        return abs(r.delta)
    value = r.new if r.status == "appeared" else r.base if r.status == "vanished" else None
    return abs(value) if value is not None else None


def _lead(d: Diff) -> str:
    """The change in words and the rows that explain it, as the text and markdown show them."""
    out = f"<p>{esc(changed_line(d))}</p>"
    if busy_line(d):
        out += f'<p class="answer">{esc(str(busy_line(d)))}</p>'
    if payback_line(d):
        out += f'<p class="answer">{esc(str(payback_line(d)))}</p>'
    rows = explain_rows(d)
    if rows:
        out += ('<h3>Explained by</h3><p class="muted">appeared and vanished first, then moved '
                'beyond noise</p><div class="scroll"><table><tr><th>row</th><th>layer</th>'
                '<th></th><th class="num">how much</th></tr>'
                + "".join("<tr>" + "".join(
                    (NUM_CELL if i == 3 else "<td>") + f"{esc(c)}</td>"
                    for i, c in enumerate(explain_cells(r))) + "</tr>" for r in rows)
                + "</table></div>")
    folded = folded_line(d)
    return out + (f'<p class="muted">{esc(folded)}</p>' if folded else "")


def diff_panes(d: Diff, options: RenderOptions) -> tuple[list[tuple[str, str]], str,
                                                          dict[str, Any]]:
    """Return the tabs, the panes' markup and the tables' data of a diff page."""
    verdict_rows = "".join(
        f"<tr><td>{esc(m.name)}</td><td>{esc(m.source)}</td>"
        f'<td class="num">{esc(fmt_value(m.base, m.unit) if m.base is not None else "")}</td>'
        f'<td class="num">{esc(fmt_value(m.new, m.unit) if m.new is not None else "")}</td>'
        f'<td class="num">{esc(fmt_change(m.change))}</td>'
        f'<td class="num">{esc(fmt_change(m.corrected_change))}</td>'
        f'<td class="verdict-{esc(m.verdict.replace(" ", "-"))}">{esc(m.verdict)}</td>'
        f'<td class="muted">{esc(m.reason)}</td></tr>' for m in d.metrics)
    overview = (
        f'<header id="header"><h1>perfstack diff</h1><p class="mono">{esc(d.base)} → '
        f'{esc(d.new)}</p></header><section id="answer"><h2>Answer</h2><p class="answer">'
        f"{esc(headline(d, None))}</p>" + _lead(d)
        + "".join(f"<p>{esc(line)}</p>" for line in environment_lines(d))
        + f"<p>{esc(d.machine.describe())}</p></section>"
        '<section id="metrics"><h2>Metrics</h2><div class="scroll"><table><tr><th>metric</th>'
        '<th>source</th><th class="num">base</th><th class="num">new</th><th class="num">'
        'change</th><th class="num">machine drift out</th><th>verdict</th><th>why</th></tr>'
        f"{verdict_rows}</table></div>"
        + (f'<p class="muted">{esc(d.family.describe())}</p>' if d.family else "")
        + "</section>"
        f'<section id="noise"><h2>Noise</h2><p class="muted">{esc(d.row_noise_reason)}</p>'
        "</section>")
    tabs = [("pane-overview", "Overview")]
    panes = [f'<main class="pane" id="pane-overview" hidden>{overview}</main>']
    tables: dict[str, Any] = {}
    for layer, changes in d.rows.items():
        if not changes or layer not in PANES:
            continue
        pane, title = PANES[layer]
        by_source: dict[str, list[Any]] = {}
        for r in changes:
            by_source.setdefault(r.source, []).append(r)
        parts = [f"<h2>{esc(title)}: what changed</h2>"]
        for source, rows in by_source.items():
            tid = f"diff-{layer}-{source}"
            tables[tid] = {
                "id": tid, "title": f"{layer} changes from {source}", "sort": 5,
                "columns": [{"title": "name"}, {"title": "by"},
                            {"title": "base", "num": True}, {"title": "new", "num": True},
                            {"title": "change", "num": True},
                            {"title": "|moved|", "num": True},
                            {"title": "drift out", "num": True}, {"title": "verdict"}],
                "rows": [{"k": r.key, "c": [
                    r.display or r.name, r.by, _num(r.base, r.unit), _num(r.new, r.unit),
                    _change(r.change),
                    _num(_moved(r), r.unit),
                    _change(r.corrected_change), row_verdict(r)]} for r in rows],
                "notes": [], "source": source}
            parts.append(f'<section><h3>from {esc(source)} ({len(rows)} rows)</h3>'
                         f'<div class="table" id="table-{esc(tid)}"></div></section>')
        tabs.append((pane, title))
        panes.append(f'<main class="pane" id="{pane}" hidden>{"".join(parts)}</main>')
    return tabs, "".join(panes), {"tables": tables, "flame": None, "flameGil": False}
