"""How close the ops ran to the machine (the roofline), in words, defined once for every
renderer: the heading, the ceilings, where the time is bound, the heaviest ops."""

from __future__ import annotations

from perfstack.analysis.panes.roofline import RoofOp, RoofView
from perfstack.report.units import fmt_seconds, fmt_si, pct, pct_fine

#: How each roof's source is said.
ROOF_SOURCES = {"measured": "measured here", "datasheet": "datasheet"}


def roof_title(v: RoofView) -> str:
    """The roofline section's heading: the step's share of the machine's peak (the ceiling
    line below names the machine)."""
    if v.peak_share is None:
        return "How close to the machine: unknown"
    return f"How close to the machine: the ops ran at {pct_fine(v.peak_share)} of its peak"


def roof_ceiling_line(v: RoofView) -> str:
    """What the ops are measured against: each type's peak, the bandwidth, and whence."""
    c = v.ceilings
    order = ("fp32", "tf32", "bf16", "fp16", "fp64", "int8")
    peaks = " · ".join(f"{t} {fmt_si(c.peak_flops[t], 'flop/s')}" for t in order
                       if t in c.peak_flops)
    memory = f" · memory {fmt_si(c.bandwidth, 'B/s')}" if c.bandwidth else ""
    source = ROOF_SOURCES.get(c.source, c.source)
    if c.source == "datasheet" and c.how.get("source"):
        source = str(c.how["source"])
    threads = f", {c.threads} threads" if c.threads and c.device == "cpu" else ""
    slower = [t for t in order if t in ("bf16", "fp16") and t in c.peak_flops
              and "fp32" in c.peak_flops and c.peak_flops[t] < c.peak_flops["fp32"]]
    emulated = (f" ({' and '.join(slower)} slower than fp32: no native support)"
                if slower and c.device == "cpu" else "")
    sheet = c.how.get("datasheet")
    beside = ""
    if c.source == "measured" and isinstance(sheet, dict):  # a GPU's: its datasheet beside
        fp32 = (sheet.get("peak_flops") or {}).get("fp32")
        beside = (f"; datasheet ({sheet.get('model')}): fp32 "
                  f"{fmt_si(fp32, 'flop/s') if fp32 else '?'} · memory "
                  f"{fmt_si(sheet.get('bandwidth') or 0, 'B/s')}")
    where = "this CPU" if c.device == "cpu" else (c.name or "the GPU")
    return f"ceilings of {where}, {source}{threads}: {peaks}{memory}{emulated}{beside}"


def roof_summary(v: RoofView) -> str:
    """Where the costed op time is bound, and how much of the op time has a cost."""
    if v.why is not None:
        return v.why
    parts = []
    if v.memory_share is not None:
        parts.append(f"{pct(v.memory_share)} memory-bound")
    if v.latency_share is not None:
        parts.append(f"{pct(v.latency_share)} in calls too small for either roof")
    covered = (f" (the ops with a known cost hold {pct(v.coverage)} of the op time)"
               if v.coverage is not None else "")
    return f"of the costed op time: {', '.join(parts)}{covered}"


def roof_rate(o: RoofOp) -> str:
    """What an op achieved: FLOP/s where it computes, else bytes/s."""
    if o.flop_s:
        return fmt_si(o.flop_s, "flop/s")
    if o.byte_s is not None:
        return fmt_si(o.byte_s, "B/s")
    return "n/a"


def roof_cells(v: RoofView) -> list[list[str]]:
    """One row per heaviest op: name, time, share, achieved, roof share, bound, type."""
    return [[o.name, fmt_seconds(o.seconds), pct(100 * o.time_share), roof_rate(o),
             pct_fine(o.roof_share) if o.roof_share is not None else "n/a", o.bound,
             o.dtype or "-"] for o in v.top]
