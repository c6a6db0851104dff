"""The first screen of the text report: what ran, the answer, the findings and where the time
goes (the budget)."""

from __future__ import annotations

from perfstack.analysis.view import View
from perfstack.render.text.grid import Column, Page, bar, cut, table, wrap
from perfstack.render.words.common import (
    answer_lines,
    by_whom,
    command_line,
    printed_caption,
    wall_line,
)
from perfstack.report.units import fmt_seconds

SEVERITY_STYLE = {"critical": "red", "warning": "yellow", "info": "cyan"}


def header(page: Page, view: View) -> None:
    """What ran and how: the workload, its wall time, the runs and the machine."""
    h = view.header
    page.add(cut(command_line(h), page.width), "bold")
    page.extend(wrap(" · ".join(h.facts), page.width))
    page.extend(wrap(wall_line(h), page.width))
    for run_id, ended in h.failures:
        page.add(cut(f"run {run_id}: {ended}", page.width), "red", "bold")
    if not h.complete:
        page.add("INTERRUPTED: this report is partial", "magenta", "bold")
    if h.printed:
        page.add(cut(printed_caption(h), page.width), "dim")
        for line in h.printed:
            page.add(cut("  " + line, page.width))


def answer(page: Page, view: View) -> None:
    """The Answer section: what bounds the workload, its hottest own function, the top finding."""
    page.section("Answer")
    for line in answer_lines(view):
        page.extend(wrap(line, page.width, indent=2, first="  "))


def findings(page: Page, view: View) -> None:
    """The Findings section, the most severe first, each with its evidence and action."""
    page.section(f"Findings ({len(view.findings)})" if view.findings else "Findings: none")
    for f in view.findings:
        prefix = f"  [{f.severity}] "
        lines = wrap(f"{f.title}  ({f.layer}, from {f.source})", page.width, first=prefix)
        if page.color:  # style the severity, which takes no width of its own
            lines[0] = lines[0].replace(f"[{f.severity}]", page.style(
                f"[{f.severity}]", SEVERITY_STYLE.get(f.severity, "")), 1)
        page.extend(lines)
        if view.full:
            for line in f.evidence:
                page.extend(wrap(line, page.width, indent=6, first="      "))
            page.extend(wrap(f"→ {f.action}", page.width, indent=6, first="    "))
        else:  # the short report: the first piece of evidence in two lines at most, the
            # action in three (at 80 columns, one cut line lost what to do)
            if f.evidence:
                page.extend(at_most(2, wrap(f.evidence[0], page.width, indent=6,
                                             first="      "), page.width))
            page.extend(at_most(3, wrap(f"→ {f.action}", page.width, indent=6,
                                         first="    "), page.width))


def at_most(count: int, lines: list[str], width: int) -> list[str]:
    """The first ``count`` lines of a wrapped text, the last cut with '…' when more
    followed."""
    if len(lines) <= count:
        return lines
    last = lines[count - 1]
    room = width - 2  # for " …": the cut falls between words, never inside one
    text = last + " " + lines[count].strip()
    at = text.rfind(" ", len(last) - len(last.lstrip()) + 1, room + 1)
    if at <= 0:
        return [*lines[:count - 1], cut(text, width)]
    return [*lines[:count - 1], text[:at].rstrip() + " …"]


#: In the short report, the native part's subdivisions get a line each only when native code
#: takes at least this share of the wall time; else they are summed up on one line.
SPLIT_LINES_FROM = 25.0


def budget(page: Page, view: View) -> None:
    """Where the time goes: the time budget's parts, with its split lines."""
    budget = view.budget
    if not budget.lines and view.device is not None:
        return  # the device's breakdown is the budget there is
    if not budget.lines:
        page.section("Where the time goes")
        page.add("  no backend measured a time budget" + by_whom(budget.measured_by), "dim")
        return
    wall = f" ({fmt_seconds(budget.wall_s)} wall time)" if budget.wall_s else ""
    page.section(f"Where the time goes{wall}")
    native = budget.share("native") or 0.0
    inline = not view.full and native < SPLIT_LINES_FROM
    shown = [ln for ln in budget.lines if not (inline and ln.depth)]
    bars = page.width >= 100
    rows = [[("└ " if ln.depth else "") + ln.title, f"{ln.share:.1f}%",
             fmt_seconds(ln.seconds) if ln.seconds is not None else "-",
             *([bar(ln.share)] if bars else []), ln.source] for ln in shown]
    page.extend(table([Column("part", name=True), Column("share"), Column("time"),
                       *([Column("")] if bars else []), Column("by")], rows, page.width))
    subs = [ln for ln in budget.lines if ln.depth]
    if inline and subs:
        parts = ", ".join(f"{ln.part} {ln.share:.1f}%" for ln in
                          sorted(subs, key=lambda ln: -ln.share))
        page.extend(wrap(f"native splits into {parts} ({subs[0].source})", page.width,
                         indent=4, first="  "))
    for note in budget.notes:
        page.extend(wrap(note, page.width, indent=2, first="  "))
