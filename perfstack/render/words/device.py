"""The device's time in words, defined once for every renderer: its parts, its heading, the
answer of a report whose only budget is the device's, the notes under it."""

from __future__ import annotations

from perfstack.analysis.panes.device import DeviceTime
from perfstack.report.units import fmt_seconds, pct

#: The device breakdown's parts in words.
DEVICE_WORDS = {
    "compute": "compute kernels",
    "communication": "collectives not hidden behind compute",
    "memory": "memcpy and memset alone",
    "idle": "idle: no kernel, no copy",
    "host_wait": "waiting for the host to launch",
}


def device_title(d: DeviceTime) -> str:
    """'Device time: busy 24% of the profiled steps (torch)'."""
    busy = f"busy {pct(d.busy)} of {d.window}" if d.busy is not None else d.window
    return f"Device time: {busy} ({d.source})"


def device_answer(d: DeviceTime) -> str:
    """The headline of a report whose only time budget is the device's."""
    parts = {p.part: p.share for p in d.parts}
    idle = parts.get("idle")
    wait = parts.get("host_wait")
    busy = pct(d.busy) if d.busy is not None else "?"
    tail = ""
    if idle is not None:
        tail = f"; idle {pct(idle)}" + (f" ({pct(wait)} waiting for the host to launch)"
                                         if wait is not None else "")
    return f"The GPU is busy {busy} of {d.window}{tail} ({d.source})."


def device_notes(d: DeviceTime) -> list[str]:
    """The figures under the device breakdown: collectives hidden, launch queue."""
    out = []
    if d.comm_overlap is not None:
        out.append(f"collectives hidden behind compute: {pct(d.comm_overlap)} of their time")
    if d.launch_delay_s is not None:
        out.append(f"launch call to start on the device: median {fmt_seconds(d.launch_delay_s)}")
    return out
