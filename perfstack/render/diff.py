"""``perfstack diff`` as text for a terminal or markdown for an issue or a pull request.

Both start with the verdict in one line ("1 regression, 0 improvements; wall time within
noise"), then the environment and the machine, then what changed. The markdown keeps the
detail in ``<details>`` so a pull-request comment stays short. Row names keep the function and
its line (``train_step (train.py:40)``), never the middle of a virtual-environment path.
"""

from __future__ import annotations

from typing import Any

from perfstack.analysis.diff import Diff
from perfstack.analysis.diff.changes import MetricChange
from perfstack.analysis.diff.rows import RowChange
from perfstack.plugin.renderer import markdown_escape as escape
from perfstack.render.text.grid import Column, table
from perfstack.report.units import fmt_value as fmt

VERDICT_MARK = {"regression": "REGRESSION", "improvement": "improvement", "changed": "changed",
                "within noise": "within noise", "cannot judge": "cannot judge",
                "appeared": "appeared", "vanished": "vanished", "unknown": "unknown"}
CHANGED = ("regression", "improvement", "changed")


def _val(value: float | None, unit: str) -> str:
    return "n/a" if value is None else fmt(value, unit)


def fmt_change(change: float | None) -> str:
    """A relative change as every diff format prints it: '+12.3%', '' when unknown."""
    return "" if change is None else f"{100 * change:+.1f}%"


def _short(value: Any, width: int = 60) -> str:
    text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def headline(d: Diff, threshold: float | None) -> str:
    """The verdict in one line: the workload's own figure and its verdict, the other metrics'
    counts, the gate."""
    regressions = [m for m in d.metrics if m.verdict == "regression"]
    improvements = [m for m in d.metrics if m.verdict == "improvement"]
    counts = (f"{len(regressions)} regression{'s' if len(regressions) != 1 else ''}, "
              f"{len(improvements)} improvement{'s' if len(improvements) != 1 else ''}")
    lead = d.lead.figure if d.lead else None
    if lead is not None:
        per = ", per sample" if d.lead and d.lead.per_sample else ""
        line = f"{lead.name} {fmt_change(lead.change) or 'n/a'} ({lead.verdict}{per}); {counts}"
        if d.lead and d.lead.different_work:
            line += " (other arguments: only the figure is judged better or worse)"
    else:
        line = counts
    if threshold is not None:
        bad = d.regressions(threshold)
        line = (f"FAIL ({len(bad)} beyond the {100 * threshold:g}% gate: "
                + ", ".join(f"{m.name} {fmt_change(m.change)}" for m in bad) + ") · " if bad else
                f"pass (gate {100 * threshold:g}%) · ") + line
    return line


def changed_line(d: Diff) -> str:
    """What differs between the sides as the user made it, or that nothing does."""
    if d.lead is None or not d.lead.changed:
        return "what changed: nothing the reports record (same script, arguments, commit, " \
            "environment)"
    return "what changed: " + "; ".join(d.lead.changed)


def busy_line(d: Diff) -> str | None:
    """That other programs kept the machine busy during the runs, when they did."""
    return d.lead.busy if d.lead and d.lead.busy else None


def payback_line(d: Diff) -> str | None:
    """Whether the new side's extra compiling pays back in its steps, when it compiles
    more."""
    return d.lead.payback if d.lead and d.lead.payback else None


def explain_rows(d: Diff) -> list[RowChange]:
    """The rows that explain the change, as the lead ranks them."""
    return d.lead.explain if d.lead else []


def folded_line(d: Diff) -> str | None:
    """How much start-up work was folded away from the rows that explain the change."""
    if d.lead is None or not d.lead.folded:
        return None
    return (f"{d.lead.folded} start-up row{'s' if d.lead.folded != 1 else ''} (imports) that "
            f"moved {fmt(d.lead.folded_s, 's')} in all folded away: start-up moves between "
            "any two processes")


def explain_cells(r: RowChange) -> list[str]:
    """A row of the lead's list: name, layer, what happened, how much."""
    if r.status == "changed":
        what = f"{_row_cells(r)[3]} ({fmt_change(r.change)})"
    else:
        value = r.new if r.status == "appeared" else r.base
        what = _val(value, r.unit)
    return [r.display, r.layer, r.status if r.status != "changed" else "moved", what]


def grouped_reasons(metrics: list[MetricChange]) -> list[tuple[list[str], str]]:
    """The reasons of the metrics that need one, each said once with every metric it is for."""
    why = [m for m in metrics if m.verdict in (*CHANGED, "cannot judge")
           or (m.verdict == "within noise" and ("says different" in m.reason
                                                or "Holm" in m.reason))]
    groups: dict[str, list[str]] = {}
    for m in why:
        reason = m.reason if m.verdict != "cannot judge" else _generic(m.reason)
        groups.setdefault(reason, []).append(m.name)
    return [(names, reason) for reason, names in groups.items()]


def _generic(reason: str) -> str:
    """A reason without its per-metric counts, so metrics that share it share one line."""
    import re

    return re.sub(r" \(n=\d+ vs \d+\)", "", reason)


def environment_lines(d: Diff) -> list[str]:
    """What differs between the two machines and installations, or that nothing does."""
    if not d.environment:
        return ["environment: same interpreter, torch, CPU, threads and GPUs"]
    out = ["ENVIRONMENT DIFFERS (this explains most differences):"]
    out += [f"  {e.what}: {_short(e.base)} -> {_short(e.new)}" for e in d.environment]
    return out


def _metric_cells(m: MetricChange) -> list[str]:
    return [m.name, _val(m.base, m.unit), _val(m.new, m.unit), fmt_change(m.change),
            VERDICT_MARK.get(m.verdict, m.verdict)]


def row_verdict(r: RowChange) -> str:
    """A row's verdict in words (beyond or within noise, appeared...), with its calls."""
    judged = {True: "beyond noise", False: "within noise", None: "cannot judge"}[r.beyond_noise]
    if r.status != "changed":
        judged = r.status + ("" if r.beyond_noise else " (within sampling noise)")
    elif r.by_metric:
        judged = f"{judged} (as {r.by_metric})"
    calls = r.counts.get("calls")
    if calls and None not in calls and calls[0] != calls[1]:
        judged += f"; calls {calls[0]:,.0f} -> {calls[1]:,.0f}"
    return judged


def _row_cells(r: RowChange) -> list[str]:
    moved = "" if r.delta is None else fmt(r.delta, r.unit) if r.unit else f"{r.delta:+g}"
    if r.delta is not None and r.delta > 0 and not moved.startswith("+"):
        moved = "+" + moved
    return [r.display, _val(r.base, r.unit), _val(r.new, r.unit), moved, fmt_change(r.change),
            row_verdict(r)]


def _top_rows(d: Diff, top: int) -> dict[str, list[RowChange]]:
    return {layer: rows[:top] for layer, rows in d.rows.items() if rows}


def render_text(d: Diff, top: int = 10, threshold: float | None = None,
                width: int = 100) -> str:
    """Return the diff for a terminal, at most ``width`` columns wide."""
    # The two paths whole (a reader copies them): on one line when they fit, else one each.
    title = f"perfstack diff: {d.base} -> {d.new}"
    out = [title] if len(title) <= width else ["perfstack diff:", f"  base: {d.base}",
                                                f"  new:  {d.new}"]
    out += ["", *_wrapped(headline(d, threshold), width)]
    out += _wrapped(changed_line(d), width)
    if busy_line(d):
        out += _wrapped(str(busy_line(d)), width)
    if payback_line(d):
        out += _wrapped(str(payback_line(d)), width)
    lead = explain_rows(d)
    if lead:
        out += ["", "Explained by (appeared and vanished first, then moved beyond noise)"]
        out += table([Column("row", name=True), Column("layer", left=True),
                      Column("", left=True), Column("how much")],
                     [explain_cells(r) for r in lead], width)
    folded = folded_line(d)
    if folded:
        out += _wrapped(folded, width)
    out += [""]
    for line in environment_lines(d):
        out += _wrapped(line, width)
    out += _wrapped("machine: " + d.machine.describe(), width)
    # The verdict next to the change: on a narrow terminal the sides' values give way first.
    out += ["", "Metrics"]
    out += table([Column("metric", name=True), Column("change"), Column("verdict", left=True),
                  Column("base"), Column("new")],
                 [[c[0], c[3], c[4], c[1], c[2]] for c in map(_metric_cells, d.metrics)], width)
    if d.family:
        out += _wrapped(d.family.describe(), width)
    why = grouped_reasons(d.metrics)
    if why:
        out += ["", "Why"]
        for names, reason in why:
            out += _wrapped(f"  {', '.join(names)}: {reason}", width)
    for layer, rows in _top_rows(d, top).items():
        out += ["", f"{layer.capitalize()} rows that moved most ({len(d.rows[layer])} in all)"]
        out += table([Column("row", name=True), Column("moved"), Column("change"),
                       Column("judged", left=True), Column("base"), Column("new")],
                      [[c[0], c[3], c[4], c[5].replace(f" (as {r.by_metric})", ""), c[1], c[2]]
                       for r, c in zip(rows, map(_row_cells, rows), strict=True)], width)
    out += ["", *_wrapped(d.row_noise_reason, width)]
    return "\n".join(out) + "\n"


def _wrapped(line: str, width: int) -> list[str]:
    """A line wrapped to ``width``, its continuation indented two more than the line."""
    import textwrap

    lead = line[:len(line) - len(line.lstrip())]
    return textwrap.wrap(line, width=width, subsequent_indent=lead + "  ",
                         break_on_hyphens=False) or [line]


def _md_table(table_rows: list[list[str]]) -> list[str]:
    head, *rows = table_rows
    lines = ["| " + " | ".join(escape(c) for c in head) + " |",
             "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(d: Diff, top: int = 10, threshold: float | None = None) -> str:
    """Return the diff as GitHub-flavoured markdown: the verdict and what changed in view, the
    rest folded away."""
    out = [f"## perfstack diff: {escape(d.base)} → {escape(d.new)}", "",
           f"**{escape(headline(d, threshold))}**", "", escape(changed_line(d)), ""]
    if busy_line(d):
        out += [f"**{escape(str(busy_line(d)))}**", ""]
    if payback_line(d):
        out += [escape(str(payback_line(d))), ""]
    lead = explain_rows(d)
    if lead:
        out += ["Explained by (appeared and vanished first, then moved beyond noise):", ""]
        out += _md_table([["row", "layer", "", "how much"]] + [explain_cells(r) for r in lead])
        out.append("")
    folded = folded_line(d)
    if folded:
        out += [f"_{escape(folded)}_", ""]
    out += [escape(line) + "  " for line in environment_lines(d)]
    out += [f"machine: {escape(d.machine.describe())}", ""]
    changed = [m for m in d.metrics if m.verdict in CHANGED]
    if changed:
        out += _md_table([["metric", "base", "new", "change", "verdict"]]
                         + [_metric_cells(m) for m in changed])
    else:
        out.append("No metric changed beyond noise.")
    if d.family:
        out += ["", f"_{escape(d.family.describe())}_"]
    out += ["", "<details>", "<summary>Every metric, and the rows that moved most</summary>", ""]
    out += _md_table([["metric", "base", "new", "change", "verdict", "why"]]
                     + [[*_metric_cells(m), m.reason] for m in d.metrics])
    for layer, rows in _top_rows(d, top).items():
        out += ["", f"**{layer.capitalize()}**", ""]
        out += _md_table([["row", "base", "new", "moved", "change", "judged"]]
                         + [_row_cells(r) for r in rows])
    out += ["", f"_{escape(d.row_noise_reason)}_", "", "</details>"]
    return "\n".join(out) + "\n"
