"""The HTML report's device section: the device's time over the profiled steps, part by part,
on the overview and again at the head of the Kernels tab."""

from __future__ import annotations

from perfstack.analysis.panes.device import DeviceTime
from perfstack.render.words.device import DEVICE_WORDS, device_notes, device_title
from perfstack.report.units import pct

from ..charts import esc
from ..grid import table
from .context import PageContext

#: The page's own tab the section is drawn in, besides the overview.
WITHIN = "pane-kernels"


def section(d: DeviceTime, section_id: str = "device") -> str:
    """Busy, compute, communication, memory, idle and how much of it waited for the host;
    collectives hidden; the launch queue."""
    rows = [[("&nbsp;&nbsp;└ " if p.depth else "") + esc(DEVICE_WORDS.get(p.part, p.part)),
             esc(pct(p.share)), f'<span class="mono">{esc(p.metric)}</span>'] for p in d.parts]
    notes = "".join(f'<p class="muted">{esc(n)}</p>' for n in device_notes(d))
    return (f'<section id="{section_id}"><h2>{esc(device_title(d))}</h2>'
            + table(["part", "share", "metric"], rows, {1}) + notes + "</section>")


def overview(d: DeviceTime, page: PageContext) -> str:
    """The section on the overview."""
    return section(d)


def within(d: DeviceTime, page: PageContext) -> str:
    """The section at the head of the Kernels tab."""
    return section(d, "device-k")
