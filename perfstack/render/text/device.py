"""The text report's sections about the device: its time, each stream, the steps by phase,
the kernels, and how close the ops ran to the machine (``perfstack.render.text`` lays out
the page and calls these)."""

from __future__ import annotations

from perfstack.analysis.view import View
from perfstack.render.text.grid import Column, Page, bar, table, wrap
from perfstack.render.words.device import (
    DEVICE_WORDS,
    STREAM_COLUMNS,
    device_notes,
    device_title,
    kernel_cells,
    kernel_kind_cells,
    kernels_title,
    outlier_line,
    roof_ceiling_line,
    roof_cells,
    roof_summary,
    roof_title,
    step_cells,
    step_sides_line,
    steps_title,
    stream_cells,
    streams_title,
    tensor_core_line,
)
from perfstack.report.units import pct


def device(page: Page, view: View) -> None:
    """The device's time over the profiled steps, part by part."""
    d = view.device
    if d is None:
        return
    page.section(device_title(d))
    bars = page.width >= 100
    rows = [[("└ " if p.depth else "") + DEVICE_WORDS.get(p.part, p.part), pct(p.share),
             *([bar(p.share)] if bars else []), p.metric] for p in d.parts]
    page.extend(table([Column("part", name=True), Column("share"),
                       *([Column("")] if bars else []), Column("metric", left=True)], rows,
                      page.width))
    for note in device_notes(d):
        page.extend(wrap(note, page.width, indent=4, first="  "))

def kernels(page: Page, view: View) -> None:
    """The kernels by kind and the top kernels."""
    k = view.kernels
    if k is None:
        return
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
    if k.count > len(k.top) and not view.full:
        page.add(f"  {k.count - len(k.top)} more in the kernel layer (--full, or the HTML's "
                 "Kernels pane)", "dim")

def streams(page: Page, view: View) -> None:
    """Each stream: busy, why it idled, its launch queue."""
    v = view.streams
    if v is None:
        return
    page.section(streams_title(v))
    page.extend(table([Column("stream", name=True), *(Column(c) for c in STREAM_COLUMNS)],
                      stream_cells(v), page.width))
    page.extend(wrap("idle: host = the next launch call not yet made; other streams = "
                     "launched, another stream busy; queue = mean launch queue depth (CUDA "
                     "stalls the host at 1,024)", page.width, indent=4, first="  "))

def steps(page: Page, view: View) -> None:
    """The steps by phase and the outlier steps."""
    v = view.steps
    if v is None:
        return
    page.section(steps_title(v))
    page.extend(table([Column("phase", name=True), Column("median"), Column("share"),
                       Column("fastest"), Column("slowest")], step_cells(v), page.width))
    sides = step_sides_line(v)
    if sides:
        page.extend(wrap(sides, page.width, indent=4, first="  "))
    for o in v.outliers:
        page.extend(wrap(outlier_line(o), page.width, indent=4, first="  "))

def roofline(page: Page, view: View) -> None:
    """How close the ops ran to the machine's ceilings."""
    v = view.roofline
    if v is None:
        return
    page.section(roof_title(v))
    page.extend(wrap(roof_ceiling_line(v), page.width, indent=4, first="  "))
    page.extend(wrap(roof_summary(v), page.width, indent=4, first="  "))
    if v.top:
        page.add("")
        page.extend(table([Column("op", name=True), Column("time"), Column("share"),
                           Column("achieved"), Column("of roof"), Column("bound", left=True),
                           Column("type", left=True)], roof_cells(v), page.width))
