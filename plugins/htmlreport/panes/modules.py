"""The HTML report's module section: the same sentences and tree table as the text, each
module's share drawn as an inline bar (forward and backward in their own colours); no
script, no network."""

from __future__ import annotations

from perfstack.analysis.panes.modules import ModuleView
from perfstack.render.words.modules import MODULE_TITLE, module_cells, module_columns, module_lines
from perfstack.report import Layer

from ..charts import esc
from ..grid import table
from .context import PageContext

#: Forward and backward, as the bars draw them.
FORWARD, BACKWARD = "#b07aa1", "#f1ce63"


def _bar(forward: float | None, backward: float | None, model: float, width: int = 160) -> str:
    """The module's forward and backward time as one bar, to the scale of the model's."""
    f = width * (forward or 0.0) / model
    b = width * (backward or 0.0) / model
    return (f'<svg class="module-bar" viewBox="0 0 {width} 10" width="{width}" height="10" '
            'aria-hidden="true">'
            f'<rect x="0" y="1" width="{f:.1f}" height="8" fill="{FORWARD}"/>'
            f'<rect x="{f:.1f}" y="1" width="{b:.1f}" height="8" fill="{BACKWARD}"/></svg>')


#: The pane's tab, and the tab it follows.
TAB = "Modules"
AFTER = "pane-python"


def pane(v: ModuleView | None, page: PageContext) -> str | None:
    """The pane (none when no module was recorded): the section, then every module."""
    if v is None:
        return None
    return section(v) + "<h2>Every module</h2>" + page.tables.html(Layer.MODULE, "no module rows")


def section(v: ModuleView) -> str:
    """Where in the model the time goes: the modules as a tree, with forward and backward
    bars."""
    lines = "".join(f"<li>{esc(line)}</li>" for line in module_lines(v))
    rows = []
    for line, cells in zip(v.lines, module_cells(v), strict=True):
        name = (f'<span class="module-name" style="padding-left:{1.2 * line.depth:.1f}em" '
                f'title="{esc(line.key)}">{esc(line.name)}</span>')
        rows.append([name, *map(esc, cells[1:]), _bar(line.forward, line.backward, v.model)])
    columns = module_columns(v)
    legend = (f'<p class="muted">bar: the model\'s time, <span style="color:{FORWARD}">'
              f'■ forward</span> <span style="color:{BACKWARD}">■ backward</span></p>')
    return (f'<section id="modules"><h2>{esc(MODULE_TITLE)}</h2><ul>{lines}</ul>' + legend
            + table(["module", *columns, ""], rows, numeric=set(range(1, len(columns) + 1)))
            + "</section>")
