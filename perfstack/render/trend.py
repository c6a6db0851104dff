"""``perfstack trend`` and ``perfstack gate`` for people: text at any width with sparklines,
and an offline HTML page with one SVG chart per series (change points marked)."""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Callable, Sequence

from perfstack.history.gate import Judgement, share
from perfstack.history.trend import (
    CHANGED,
    MIN_RUNS,
    STEADY,
    UNSURE,
    Change,
    Trend,
    Verdict,
)
from perfstack.render.text.grid import Column, cut, table, wrap
from perfstack.report.units import fmt_value

SPARKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 12


def signed(change: float) -> str:
    """Return a relative change as people read it: +10.2%, -0.4%."""
    return "n/a" if not math.isfinite(change) else f"{change * 100:+.1f}%"


def sparkline(values: Sequence[float | None], width: int = SPARK_WIDTH) -> str:
    """Return ``values`` as at most ``width`` block characters (means of equal buckets; a
    space where a bucket has no value)."""
    if not values:
        return ""
    buckets: list[float | None] = []
    n = len(values)
    size = max(1, math.ceil(n / width))
    for start in range(0, n, size):
        found = [v for v in values[start:start + size] if v is not None]
        buckets.append(sum(found) / len(found) if found else None)
    present = [b for b in buckets if b is not None]
    if not present:
        return " " * len(buckets)
    low, high = min(present), max(present)
    span = high - low
    return "".join(" " if b is None else SPARKS[0 if span == 0 else
                                                 min(7, int((b - low) / span * 8))]
                   for b in buckets)


def where(c: Change) -> str:
    """Return the run (or runs) a step may be at, with the commits around: 'run 31
    (abc1234..def5678)', 'runs 18-33 (abc1234..0123456)'."""
    if c.precise:
        return f"run {c.run.id} ({commit_range(c)})"
    return f"runs {(c.earliest or c.run).id}-{c.latest_id} ({commit_range(c)})"


def commit_range(c: Change) -> str:
    """Return the commits a step happened between: 'abc1234..def5678', or 'same commit ...'
    when every run it may be at had one commit."""
    older = c.previous if c.precise else (c.before_earliest or c.previous)
    newer = c.run if c.precise else (c.latest or c.run)
    before, after = (older.commit or "")[:7], (newer.commit or "")[:7]
    if not before and not after:
        return "no commits recorded"
    if before == after:
        return f"same commit {after}: not a code change"
    return f"{before or '?'}..{after or '?'}"


def change_lines(c: Change, width: int, top: int = 3) -> list[str]:
    """Return one change point in a few lines: where, what, how sure, and what moved."""
    s = c.step
    verdict = {True: "worse", False: "better", None: ""}[c.worse]
    head = (f"{where(c)}: {c.series.label} {signed(s.change)} "
            f"[{signed(s.low)}, {signed(s.high)}] {verdict}").rstrip()
    lines = wrap(head, width, indent=4, first="  ")
    lines += wrap(f"{fmt_value(s.before.mean, c.series.unit)} -> "
                  f"{fmt_value(s.after.mean, c.series.unit)}, {s.before.n} runs before, "
                  f"{s.after.n} after, p {_p(s.pvalue)}", width, indent=4, first="    ")
    rows = [m for m in c.movers if m.series.kind == "row"][:top]
    if rows:
        layer = f"in the {c.layer} layer: " if c.layer else ""
        parts = [f"{m.series.label} {signed(m.change)}" + (
            f" ({m.share * 100:.0f}% of the step)" if m.share is not None else "")
            for m in rows]
        lines += wrap(layer + "; ".join(parts), width, indent=6, first="    ")
    others = [m for m in c.movers if m.series.kind == "metric"][:top]
    if others:
        lines += wrap("with it: " + ", ".join(f"{m.series.label} {signed(m.change)}"
                                              for m in others), width, indent=6,
                      first="    ")
    return lines


def _p(p: float) -> str:
    return f"< {1 / 2000:.4f}" if p <= 1 / 2000 else f"{p:.4f}"


def verdict_note(v: Verdict) -> str:
    """Return a series' verdict in a few words (a table cell)."""
    if v.status == CHANGED:
        last = v.changes[-1]
        return f"{signed(last.step.change)} at run {last.run.id}"
    if v.status == UNSURE:
        if v.possible is not None:
            return f"possible {signed(v.possible.step.change)}"
        if v.current is None or v.current.n < MIN_RUNS:
            return "too few runs"
        return "too noisy yet"
    return "no change"


def render_text(trends: Sequence[Trend], width: int, all_series: bool = False) -> str:
    """Return the trends for a terminal of ``width`` columns: the change points first, then
    what cannot be told yet, then one line per series."""
    out: list[str] = []
    for t in trends:
        g = t.group
        first, last = g.runs[0].started[:10], g.runs[-1].started[:10]
        out += wrap(f"{' '.join(g.workload)}", width, indent=2, first="workload: ")
        out.append(cut(f"machine {g.machine}: {len(g.runs)} run{'s' if len(g.runs) != 1 else ''}"
                       f", {first} to {last}", width))
        aside = t.set_aside
        if aside:
            out += wrap(f"set aside, disturbed by other programs ({len(aside)}): " + "; ".join(
                f"run {r.id} ({r.disturbed})" for r in aside), width, indent=4, first="  ")
        out.append("")
        if len(g.runs) < MIN_RUNS and not all_series:
            out += wrap(f"Cannot tell yet: a trend needs {MIN_RUNS} runs of a workload on one "
                        f"machine, and this one has {len(g.runs)} (each perfstack run of it "
                        "adds one; --all lists its series).", width)
            out.append("")
            continue
        changes = t.changes
        rule = f"permutation test p < 0.001, steps of {t.min_change:.0%} or more"
        if changes:
            out.append(f"Change points ({rule})")
            for c in _leading(changes, g.figure):
                out += change_lines(c, width)
        else:
            out.append(f"No change points ({rule}).")
        if t.informational:
            out += ["", "Informational (series with no better direction)"]
            for c in _leading(t.informational):
                out += wrap(f"{where(c)}: {c.series.label} {signed(c.step.change)}", width,
                            indent=4, first="  ")
        out += _unsure_lines(t, width)
        shown = [v for v in t.verdicts if all_series or v.status != STEADY
                 or v.series.key == "wall_time"]
        out.append("")
        rows = [[v.series.label, sparkline(v.values), verdict_note(v),
                 f"{v.noise * 100:.1f}%" if v.noise is not None else "n/a",
                 fmt_value(v.current.mean, v.series.unit) if v.current else "n/a"]
                for v in shown]
        # The verdict before the figures: at 80 columns the level gives way first.
        out += table([Column("series", name=True), Column("history", left=True),
                      Column("verdict", left=True), Column("noise"),
                      Column("newest level")], rows, width)
        hidden = len(t.verdicts) - len(shown)
        if hidden:
            out.append(f"  and {hidden} more series with no change (--all lists them)")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _leading(changes: Sequence[Change], figure: str | None = None) -> list[Change]:
    """The change points to show: a row's step at the run where a metric stepped is shown as
    that metric's mover, not again; at one run, the workload's own ``figure`` first."""
    metric_runs = {c.run.id for c in changes if c.series.kind == "metric"}
    shown = [c for c in changes if c.series.kind == "metric" or c.run.id not in metric_runs]
    return sorted(shown, key=lambda c: (c.step.index, c.series.key != figure))


def _unsure_lines(t: Trend, width: int) -> list[str]:
    """Possible steps one by one; the series too noisy or too short for a step of the
    minimum, together."""
    unsure = [v for v in t.verdicts if v.status == UNSURE]
    if not unsure:
        return []
    out = ["", "Cannot tell yet"]
    for v in unsure:
        if v.possible is None:
            continue
        s = v.possible.step
        out += wrap(f"{v.series.label}: a possible {signed(s.change)} step at "
                    f"{where(v.possible)}, p {s.pvalue:.3f}: not significant yet", width,
                    indent=4, first="  ")
    few = [v for v in unsure if v.possible is None and (v.current is None
                                                        or v.current.n < MIN_RUNS)]
    if few:
        out += wrap(f"{len(few)} series with fewer than {MIN_RUNS} runs: "
                    + _names(few), width, indent=4, first="  ")
    noisy = [v for v in unsure if v.possible is None and v not in few]
    if noisy:
        needed = [max(v.runs_needed - v.current.n, 1) for v in noisy
                  if v.runs_needed is not None and v.current is not None]
        worst = max(noisy, key=lambda v: v.detectable or 0.0)
        out += wrap(f"{len(noisy)} series too noisy for a {t.min_change:.0%} step so far "
                    f"(the worst, {worst.series.label}: "
                    f"{(worst.noise or 0) * 100:.1f}% noise, steps under "
                    f"{(worst.detectable or 0) * 100:.1f}% unseen"
                    + (f"; up to {max(needed)} more runs" if needed else "") + "): "
                    + _names(noisy), width, indent=4, first="  ")
    return out


def _names(verdicts: Sequence[Verdict], shown: int = 6) -> str:
    """Some series' names, the first few (the table below lists them all with --all)."""
    names = [v.series.label for v in verdicts[:shown]]
    more = len(verdicts) - shown
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def gate_rate_line(judgements: Sequence[Judgement], alpha: float, figure: str | None) -> str:
    """The false-alarm rate the gate holds, in one line: its significance over every series
    judged, and the workload's own figure's half of it where that is gated (``gate.share``)."""
    gated = len(judgements)
    held = figure is not None and any(j.series.key == figure for j in judgements) and gated > 1
    split = (f"{figure} holds {100 * share(alpha, True, gated, True):.3g}%, the other "
             f"{gated - 1} series share the rest" if held else
             f"each series {100 * share(alpha, False, gated, False):.3g}%")
    return (f"false alarms: {gated} series judged at {100 * alpha:.3g}% in all (weighted "
            f"Bonferroni: {split}; the rates on quiet histories: docs/history.md)")


def render_gate(judgements: Sequence[Judgement], width: int, threshold: float,
                disturbed: str | None = None, alpha: float | None = None,
                figure: str | None = None) -> str:
    """Return the gate's answer: the verdict, where a regression landed, one line per
    series, and (with ``alpha``) the false-alarm rate it holds."""
    if disturbed is not None:
        return "\n".join(wrap(
            f"cannot judge: the newest run was disturbed ({disturbed}); its figures say "
            "more about the other programs than about the code: run it again on a quiet "
            "machine", width)) + "\n"
    judged = [j for j in judgements if j.reference.n >= MIN_RUNS or j.since is not None]
    if judgements and not judged:
        before = max(j.reference.n for j in judgements)
        return "\n".join(wrap(
            f"ok (cannot judge yet): {before} run{'s' if before != 1 else ''} before the newest;"
            f" the gate judges a series once it has {MIN_RUNS} (each perfstack run adds one)",
            width)) + "\n"
    bad = [j for j in judgements if j.regression]
    head = (f"REGRESSION: {len(bad)} of {len(judgements)} series worse by more than "
            f"{threshold:.0%}, beyond the history's noise" if bad else
            f"ok: no series worse by more than {threshold:.0%} beyond the history's noise "
            f"({len(judgements)} checked)")
    out = wrap(head, width)
    for j in bad:
        if j.since is not None:
            commits = f"{(j.before.commit if j.before else None) or '?'}"[:7] + ".." + \
                f"{j.since.commit or '?'}"[:7]
            out += wrap(f"{j.series.label} {signed(j.change)} since run {j.since.id} "
                        f"({commits}, {j.runs} runs at the new level); it fails until fixed "
                        f"or accepted (--since {j.since.started[:19]})", width, indent=4,
                        first="  ")
    rows = [[j.series.label, signed(j.change), f"{j.pvalue:.4f}", j.note,
             fmt_value(j.value, j.series.unit)
             + (f" ({j.runs} runs)" if j.runs > 1 else ""),
             fmt_value(j.reference.mean, j.series.unit) if j.reference.n else "n/a"]
            for j in judgements]
    rate = wrap(gate_rate_line(judgements, alpha, figure), width) if alpha is not None else []
    return "\n".join([*out,
                      *table([Column("series", name=True), Column("change"), Column("p"),
                              Column("verdict", left=True), Column("newest"),
                              Column("before")], rows, width), *rate]) + "\n"


def render_html(trends: Sequence[Trend]) -> str:
    """Return one offline HTML page: per group, the change points and one SVG chart per
    series that changed or cannot tell (and wall time), change points marked."""
    parts = ["<!doctype html><html lang=en><head><meta charset=utf-8>",
             "<title>perfstack trend</title><style>",
             "body{font:14px system-ui,sans-serif;margin:2em;max-width:60em;color:#222}",
             "h2{font-size:1.1em;margin-top:2em}figure{margin:1em 0}",
             "figcaption{font-size:.9em;color:#444}.worse{color:#b00}.better{color:#070}",
             "svg{background:#fafafa;border:1px solid #ddd}</style></head><body>",
             "<h1>perfstack trend</h1>"]
    for t in trends:
        g = t.group
        parts.append(f"<h2>{html.escape(' '.join(g.workload))}</h2><p>machine "
                     f"<code>{html.escape(g.machine)}</code>: {len(g.runs)} runs, "
                     f"{html.escape(g.runs[0].started[:10])} to "
                     f"{html.escape(g.runs[-1].started[:10])}</p>")
        if t.changes:
            parts.append("<ul>")
            for c in _leading(t.changes, g.figure):
                words = " ".join(change_lines(c, 10_000)).split()
                kind = {True: "worse", False: "better", None: ""}[c.worse]
                parts.append(f"<li class='{kind}'>{html.escape(' '.join(words))}</li>")
            parts.append("</ul>")
        else:
            parts.append("<p>No change points.</p>")
        for v in chart_order(t):
            parts.append(_chart(v, t))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def chart_order(t: Trend) -> list[Verdict]:
    """The series the page draws, in its order: the workload's own figure first, then those
    that changed (worse first), then those that cannot tell, then the wall time."""
    def rank(v: Verdict) -> tuple[int, int, str]:
        figure = v.series.kind == "metric" and v.series.key == t.group.figure
        worse = any(c.worse for c in v.changes)
        status = {CHANGED: 0, UNSURE: 1}.get(v.status, 2)
        return (0 if figure else 1 + status, 0 if worse else 1, v.series.label)

    shown = [v for v in t.verdicts if v.status != STEADY or v.series.key == "wall_time"
             or (v.series.kind == "metric" and v.series.key == t.group.figure)]
    return sorted(shown, key=rank)


def _chart(v: Verdict, t: Trend, w: int = 640, h: int = 180, pad: int = 36) -> str:
    """One series as an SVG: its points, each segment's level, change points as lines."""
    pts = [(i, x) for i, x in enumerate(v.values) if x is not None]
    if not pts:
        return ""
    lo = low = min(x for _, x in pts)
    hi = high = max(x for _, x in pts)
    span = (hi - lo) or abs(hi) or 1.0
    lo, hi = lo - span * 0.1, hi + span * 0.1
    n = max(len(v.values) - 1, 1)

    def px(i: float) -> float:
        return pad + (w - 2 * pad) * i / n

    def py(x: float) -> float:
        return h - pad - (h - 1.5 * pad) * (x - lo) / (hi - lo)

    items = [f"<svg viewBox='0 0 {w} {h}' width='{w}' height='{h}' role='img' "
             f"aria-label='{html.escape(v.series.label)}'>"]
    items.append(f"<text x='{pad}' y='14' font-size='11'>"
                 f"{html.escape(fmt_value(high, v.series.unit))}</text>")
    items.append(f"<text x='{pad}' y='{h - pad + 12}' font-size='11'>"
                 f"{html.escape(fmt_value(low, v.series.unit))}</text>")
    items += _x_axis(t, v, px, h - pad / 2, w)
    cuts = [_run_position(t, c) for c in v.changes]
    edges = [0, *cuts, len(v.values)]
    for start, stop in itertools.pairwise(edges):  # each segment's level
        inside = [x for i, x in pts if start <= i < stop]
        if inside:
            level = py(sum(inside) / len(inside))
            items.append(f"<line x1='{px(start):.1f}' x2='{px(max(stop - 1, start)):.1f}' "
                         f"y1='{level:.1f}' y2='{level:.1f}' stroke='#888' "
                         f"stroke-width='2'/>")
    for c, at in zip(v.changes, cuts, strict=True):
        x = px(at - 0.5)
        items.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='0' y2='{h}' stroke='#c00' "
                     f"stroke-dasharray='4 3'><title>run {c.run.id} "
                     f"({html.escape(commit_range(c))}): "
                     f"{html.escape(signed(c.step.change))}</title></line>")
    items.append("<polyline fill='none' stroke='#48c' stroke-width='1' points='"
                 + " ".join(f"{px(i):.1f},{py(x):.1f}" for i, x in pts) + "'/>")
    for i, x in pts:
        items.append(f"<circle cx='{px(i):.1f}' cy='{py(x):.1f}' r='2' fill='#48c'>"
                     f"<title>run {t.group.runs[i].id}: "
                     f"{html.escape(fmt_value(x, v.series.unit))}</title></circle>")
    items.append("</svg>")
    caption = f"{html.escape(v.series.label)} ({html.escape(v.series.layer)}): " \
        f"{html.escape(verdict_note(v))}"
    return f"<figure>{''.join(items)}<figcaption>{caption}</figcaption></figure>"


def _x_axis(t: Trend, v: Verdict, px: Callable[[float], float], y: float,
            w: int) -> list[str]:
    """The runs along the bottom: the first and the newest, and each change point with the
    commit it landed in; a run set aside as disturbed is a grey cross."""
    runs = t.group.runs
    marks = {0: runs[0], len(runs) - 1: runs[-1]}
    marks.update({_run_position(t, c): c.run for c in v.changes})
    out = [f"<line x1='{px(0):.1f}' x2='{px(len(runs) - 1):.1f}' y1='{y - 8:.1f}' "
           f"y2='{y - 8:.1f}' stroke='#bbb'/>"]
    for i, run in sorted(marks.items()):
        commit = f" {run.commit[:7]}" if run.commit else ""
        anchor = "start" if i == 0 else "end" if i == len(runs) - 1 else "middle"
        out.append(f"<text x='{min(max(px(i), 2), w - 2):.1f}' y='{y + 6:.1f}' "
                   f"font-size='10' text-anchor='{anchor}'>run {run.id}"
                   f"{html.escape(commit)}</text>")
    for i, run in enumerate(runs):
        if run.disturbed:
            out.append(f"<text x='{px(i):.1f}' y='{y - 5:.1f}' font-size='10' fill='#999' "
                       f"text-anchor='middle'>&#215;<title>run {run.id} set aside: "
                       f"{html.escape(run.disturbed)}</title></text>")
    return out


def _run_position(t: Trend, c: Change) -> int:
    return next(i for i, r in enumerate(t.group.runs) if r.id == c.run.id)


__all__ = ["CHANGED", "STEADY", "UNSURE", "gate_rate_line", "render_gate", "render_html",
           "render_text", "sparkline"]
