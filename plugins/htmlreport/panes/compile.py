"""The HTML report's Compile pane: what torch.compile did, each frame's compile time by phase
as a bar (dynamo's tracing, the backend compiler, the backward graph's compile)."""

from __future__ import annotations

from perfstack.analysis.panes.compile import CompileView
from perfstack.render.words.compile import (
    COMPILE_COLUMNS,
    COMPILE_TITLE,
    LINE_COLUMNS,
    compile_cells,
    compile_lines,
    line_cells,
    line_kernels,
    lines_sentence,
)
from perfstack.report import Layer

from ..charts import esc
from ..grid import table
from .context import PageContext

#: Each compile phase's colour in the bars.
PHASES = (("dynamo_s", "#4e79a7", "dynamo's tracing"), ("backend_s", "#f28e2b",
                                                         "the backend compiler"),
          ("backward_s", "#e15759", "the backward graph"))


def _bar(frame: object, longest: float) -> str:
    width, x, parts = 160.0, 0.0, []
    for attr, colour, what in PHASES:
        seconds = getattr(frame, attr) or 0.0
        w = width * seconds / longest if longest > 0 else 0.0
        if w > 0:
            parts.append(f'<rect x="{x:.1f}" y="2" width="{w:.1f}" height="10" '
                         f'fill="{colour}"><title>{esc(what)}: {seconds:.3g} s</title></rect>')
        x += w
    return f'<svg width="{width:.0f}" height="14">{"".join(parts)}</svg>'


#: The pane's tab, and the tab it follows.
TAB = "Compile"
AFTER = "pane-python"


def pane(v: CompileView | None, page: PageContext) -> str | None:
    """The pane (none when torch.compile was not used): the section, then every frame."""
    if v is None:
        return None
    return (section(v) + "<h2>Every frame and graph break</h2>"
            + page.tables.html(Layer.COMPILE, "no compile rows"))


def section(v: CompileView) -> str:
    """What torch.compile compiled, where it broke, what it cost; its frames as bars."""
    lines = "".join(f"<li>{esc(line)}</li>" for line in compile_lines(v))
    longest = max((f.seconds or 0.0 for f in v.frames), default=0.0)
    rows = [[esc(cells[0]), *map(esc, cells[1:]), _bar(frame, longest)]
            for frame, cells in zip(v.frames, compile_cells(v), strict=True)]
    legend = "".join(f'<span style="color:{c}">■ {esc(w)}</span> ' for _, c, w in PHASES)
    frames = (f'<p class="muted">bar: each frame\'s compile time, {legend}</p>'
              + table(["frame", *COMPILE_COLUMNS, ""], rows,
                       numeric=set(range(1, len(COMPILE_COLUMNS) + 1)))) if rows else ""
    return (f'<section id="compile"><h2>{esc(COMPILE_TITLE)}</h2><ul>{lines}</ul>{frames}'
            f"{_lines(v)}</section>")


def _lines(v: CompileView) -> str:
    """The compiled kernels' time by the user's line, with each line's kernels."""
    said = lines_sentence(v)
    if said is None:
        return ""
    rows = [[*map(esc, cells), f'<span class="muted">{esc(kernels)}</span>']
            for cells, kernels in zip(line_cells(v), line_kernels(v), strict=True)]
    more = (f'<p class="muted">{v.more_lines} more line(s) in the compile layer below.</p>'
            if v.more_lines else "")
    return (f"<h3>Your lines in compiled code</h3><p>{esc(said)}</p>"
            + table(["line", *LINE_COLUMNS, "which kernels"], rows,
                     numeric=set(range(1, len(LINE_COLUMNS) + 1))) + more)
