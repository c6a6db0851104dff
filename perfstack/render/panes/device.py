"""The device pane in text and markdown: the device's time over the profiled steps, part by
part (``perfstack.render.text`` lays out the page and calls it, as
``perfstack.analysis.panes.PANES`` lists it)."""

from __future__ import annotations

from perfstack.analysis.panes.device import DeviceTime
from perfstack.plugin.renderer import markdown_escape as escape
from perfstack.plugin.renderer import markdown_table
from perfstack.render.text.grid import Column, Page, bar, table, wrap
from perfstack.render.words.device import DEVICE_WORDS, device_notes, device_title
from perfstack.report.units import pct


def text(page: Page, d: DeviceTime) -> None:
    """The device's time over the profiled steps, part by part (a bar a part from 100
    columns)."""
    page.section(device_title(d))
    bars = page.width >= 100
    rows = [[("└ " if p.depth else "") + DEVICE_WORDS.get(p.part, p.part), pct(p.share),
             *([bar(p.share)] if bars else []), p.metric] for p in d.parts]
    page.extend(table([Column("part", name=True), Column("share"),
                       *([Column("")] if bars else []), Column("metric", left=True)], rows,
                      page.width))
    for note in device_notes(d):
        page.extend(wrap(note, page.width, indent=4, first="  "))


def markdown(d: DeviceTime) -> list[str]:
    """The device's time over the profiled steps, part by part, and its notes."""
    out = ["", f"### {escape(device_title(d))}", ""]
    out += markdown_table(["part", "share", "metric"], [
        [("└ " if p.depth else "") + escape(DEVICE_WORDS.get(p.part, p.part)),
         pct(p.share), escape(p.metric)] for p in d.parts])
    return [*out, "", *(f"_{escape(n)}_" for n in device_notes(d))]
