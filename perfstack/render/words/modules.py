"""The words of the module view (``perfstack.analysis.panes.modules``), shared by every format."""

from __future__ import annotations

from perfstack.analysis.panes.modules import ModuleView
from perfstack.report.units import fmt_seconds, fmt_value, pct

#: The module section's title, in every format.
MODULE_TITLE = "Where in the model the time goes (by nn.Module)"
#: The columns of the module table after the module's name.
MODULE_COLUMNS = ("calls", "forward", "backward", "share")
#: The column added where a memory profile says what each call left allocated.
KEPT_COLUMN = "kept a call"
#: How many module types the by-type line names.
KINDS = 4


def module_columns(v: ModuleView) -> tuple[str, ...]:
    """The table's columns after the name."""
    return MODULE_COLUMNS + ((KEPT_COLUMN,) if v.kept else ())


def module_lines(v: ModuleView) -> list[str]:
    """What the table says, in sentences: the model's time, its largest part, its types."""
    over = (f"over the {v.steps} profiled steps ({pct(v.step_share)} of their time)"
            if v.steps and v.step_share is not None else "over the profiled run")
    parts = f"forward {fmt_seconds(v.forward)}"
    parts += (f", backward {fmt_seconds(v.backward)}" if v.backward is not None else
              "; no backward was linked to them (the trace holds no training step)")
    whose = f"rank {v.rank}'s (of {v.ranks} ranks) " if v.ranks > 1 else ""
    lines = [f"The model's {whose}modules take {fmt_seconds(v.model)} {over}: {parts}."]
    if v.largest is not None:
        lines.append(f"The largest module with no modules inside: {v.largest.dotted}, "
                     f"{pct(v.largest.share)} of the model's time.")
    if v.kinds:
        kinds = ", ".join(f"{kind} {pct(share)} ({n})" for kind, share, n in v.kinds[:KINDS])
        lines.append(f"By type, modules with none inside (how many): {kinds}.")
    if v.more:
        lines.append(f"{v.more} smaller module(s) of {v.modules} not listed (--full lists "
                     "more; the JSON holds them all).")
    return lines


def module_cells(v: ModuleView) -> list[list[str]]:
    """The table's rows: the name indented by its depth, then the columns' values."""
    out = []
    for line in v.lines:
        cells = ["  " * line.depth + line.name,
                 fmt_value(line.calls, "count") if line.calls is not None else "—",
                 fmt_seconds(line.forward) if line.forward is not None else "—",
                 fmt_seconds(line.backward) if line.backward is not None else "—",
                 pct(line.share)]
        if v.kept:
            cells.append(fmt_value(line.kept, "B") if line.kept is not None else "—")
        out.append(cells)
    return out
