"""The kernels pane in text and markdown: the device's kernel time by kind and the top
kernels (``perfstack.render.text`` lays out the page and calls it, as
``perfstack.analysis.panes.PANES`` lists it)."""

from __future__ import annotations

from perfstack.analysis.panes.kernels import KernelView
from perfstack.plugin.renderer import markdown_escape as escape
from perfstack.plugin.renderer import markdown_table
from perfstack.render.text.grid import Column, Page, table, wrap
from perfstack.render.words.kernels import (
    kernel_cells,
    kernel_kind_cells,
    kernels_title,
    tensor_core_line,
)


def text(page: Page, k: KernelView) -> None:
    """The kernels by kind, the tensor cores' share, and the top kernels."""
    page.section(kernels_title(k))
    page.extend(table([Column("kind", name=True), Column("share"), Column("time"),
                       Column("kernels")], kernel_kind_cells(k), page.width))
    tensor = tensor_core_line(k)
    if tensor is not None:
        page.extend(wrap(tensor, page.width, indent=4, first="  "))
    page.add("")
    page.extend(table([Column("top kernel", name=True), Column("kind", left=True),
                       Column("share"), Column("calls"), Column("mean")],
                      kernel_cells(k), page.width))
    if k.more:
        page.add(f"  {k.more} more in the kernel layer (--full, or the HTML's Kernels pane)",
                 "dim")


def markdown(k: KernelView) -> list[str]:
    """The kernels by kind, the tensor cores' share, and the top kernels."""
    out = ["", f"### {escape(kernels_title(k))}", ""]
    out += markdown_table(["kind", "share", "time", "kernels"], kernel_kind_cells(k))
    tensor = tensor_core_line(k)
    if tensor is not None:
        out += ["", f"_{escape(tensor)}_"]
    out += [""]
    return out + markdown_table(["top kernel", "kind", "share", "calls", "mean"],
                                [[escape(c) for c in row] for row in kernel_cells(k)])
