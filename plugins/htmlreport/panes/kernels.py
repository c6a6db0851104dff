"""The HTML report's kernel view, in the Kernels tab above every kernel's row: the kernels by
kind and the top kernels, with their share of kernel time (the text's figures; the full
names are in each row's title and in the kernel table below)."""

from __future__ import annotations

from perfstack.analysis.panes.kernels import KernelView
from perfstack.render.words.kernels import (
    kernel_cells,
    kernel_kind_cells,
    kernels_title,
    tensor_core_line,
)

from ..charts import esc
from ..grid import table
from .context import PageContext

#: The page's own tab the section is drawn in.
WITHIN = "pane-kernels"


def within(k: KernelView, page: PageContext) -> str:
    """The kinds, the tensor cores' share and the top kernels."""
    kinds = [[esc(c) for c in cells] for cells in kernel_kind_cells(k)]
    top = [[f'<span class="mono" title="{esc(t.name)}">{esc(cells[0])}</span>',
            *(esc(c) for c in cells[1:])]
           for t, cells in zip(k.top, kernel_cells(k), strict=True)]
    return (f'<section id="kernel-view"><h2>{esc(kernels_title(k))}</h2>'
            + table(["kind", "share", "time", "kernels"], kinds, {1, 2, 3})
            + (f'<p class="muted">{esc(tensor)}</p>' if (tensor := tensor_core_line(k)) else "")
            + table(["top kernel", "kind", "share", "calls", "mean"], top, {2, 3, 4})
            + "</section>")
