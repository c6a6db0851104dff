"""``perfstack diff`` as text for a terminal or markdown for an issue or a pull request."""

from __future__ import annotations

from typing import Any

from perfstack.analysis.diff import Diff, MetricChange, RowChange
from perfstack.render import markdown_escape as escape
from perfstack.units import fmt_value as fmt

VERDICT_MARK = {"regression": "REGRESSION", "improvement": "improvement", "changed": "changed",
                "within noise": "within noise", "cannot judge": "cannot judge",
                "appeared": "appeared", "vanished": "vanished", "unknown": "unknown"}


def _val(value: float | None, unit: str) -> str:
    return "n/a" if value is None else fmt(value, unit)


def _pct(change: float | None) -> str:
    return "" if change is None else f"{100 * change:+.1f}%"


def _short(value: Any, width: int = 60) -> str:
    text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _metric_cells(m: MetricChange) -> list[str]:
    return [m.name, m.layer, m.source, _val(m.base, m.unit), _val(m.new, m.unit),
            _pct(m.change), VERDICT_MARK.get(m.verdict, m.verdict), m.reason]


def _row_cells(r: RowChange) -> list[str]:
    moved = "" if r.delta is None else fmt(r.delta, r.unit) if r.unit else f"{r.delta:+g}"
    if r.delta is not None and r.delta > 0 and not moved.startswith("+"):
        moved = "+" + moved
    judged = {True: "beyond noise", False: "within noise", None: "cannot judge"}[r.beyond_noise]
    if r.status != "changed":
        judged = r.status
    calls = r.counts.get("calls")
    if calls and None not in calls and calls[0] != calls[1]:
        judged += f"; calls {calls[0]:,.0f} -> {calls[1]:,.0f}"
    return [r.name[:70], r.source, r.by, _val(r.base, r.unit), _val(r.new, r.unit), moved,
            _pct(r.change), judged]


def _top_rows(d: Diff, top: int) -> dict[str, list[RowChange]]:
    return {layer: rows[:top] for layer, rows in d.rows.items() if rows}


def render_text(d: Diff, top: int = 10, threshold: float | None = None) -> str:
    """Return the diff for a terminal."""
    out = [f"perfstack diff: {d.base} -> {d.new}", ""]
    if d.environment:
        out.append("ENVIRONMENT DIFFERS (this explains most differences):")
        out += [f"  {e.what}: {_short(e.base)} -> {_short(e.new)}" for e in d.environment]
    else:
        out.append("environment: same interpreter, torch, CPU, threads and GPUs")
    out.append("machine: " + d.machine.describe())
    out += ["", "Metrics"]
    table = [["metric", "layer", "source", "base", "new", "change", "verdict", "why"]]
    table += [_metric_cells(m) for m in d.metrics]
    out += _columns(table)
    for layer, rows in _top_rows(d, top).items():
        out += ["", f"{layer.capitalize()} rows that moved most ({len(d.rows[layer])} in all)"]
        out += _columns([["row", "source", "by", "base", "new", "moved", "change", "judged"]]
                        + [_row_cells(r) for r in rows])
    out += ["", d.row_noise_reason]
    if threshold is not None:
        bad = d.regressions(threshold)
        out.append("")
        if bad:
            out.append(f"FAIL: {len(bad)} metric(s) regressed significantly by more than "
                       f"{100 * threshold:g}%: " + ", ".join(
                           f"{m.name} {_pct(m.change)}" for m in bad))
        else:
            out.append(f"pass: no metric regressed significantly by more than {100 * threshold:g}%")
    return "\n".join(out) + "\n"


def _columns(table: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in table]


def _md_table(table: list[list[str]]) -> list[str]:
    head, *rows = table
    lines = ["| " + " | ".join(escape(c) for c in head) + " |",
             "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(d: Diff, top: int = 10, threshold: float | None = None) -> str:
    """Return the diff as GitHub-flavoured markdown."""
    out = [f"## perfstack diff: {escape(d.base)} → {escape(d.new)}", ""]
    if threshold is not None:
        bad = d.regressions(threshold)
        out += [f"**{'FAIL' if bad else 'pass'}**: "
                + (", ".join(f"{escape(m.name)} {_pct(m.change)}" for m in bad)
                   if bad else "no significant regression")
                + f" (gate: {100 * threshold:g}%)", ""]
    if d.environment:
        out += ["> **The environments differ** — this explains most differences:", ">"]
        out += [f"> - {escape(e.what)}: {escape(_short(e.base))} → "
                f"{escape(_short(e.new))}" for e in d.environment]
        out.append("")
    out += [f"_machine: {escape(d.machine.describe())}_", ""]
    out += ["### Metrics", ""]
    out += _md_table([["metric", "layer", "source", "base", "new", "change", "verdict", "why"]]
                     + [_metric_cells(m) for m in d.metrics])
    for layer, rows in _top_rows(d, top).items():
        out += ["", f"### {layer.capitalize()}: rows that moved most", ""]
        out += _md_table([["row", "source", "by", "base", "new", "moved", "change", "judged"]]
                         + [_row_cells(r) for r in rows])
    out += ["", f"_{escape(d.row_noise_reason)}_"]
    return "\n".join(out) + "\n"
