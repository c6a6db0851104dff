"""The words of the memory view (``perfstack.analysis.panes.memory``), shared by every format."""

from __future__ import annotations

from perfstack.analysis.panes.memory import MemoryView
from perfstack.report.units import fmt_seconds, fmt_value, pct

#: The memory section's title, in every format.
MEMORY_TITLE = "Where the memory goes"
#: The columns of the holders' table.
HOLDER_COLUMNS = ("at the peak", "share", "grows a step", "at exit")


def _bytes(value: float | None) -> str:
    return fmt_value(value, "B") if value is not None else "—"


def peak_line(v: MemoryView) -> str:
    """The peaks in one line: the heap's (when, in which step), the resident memory's."""
    parts = []
    if v.peak_heap is not None:
        when = ""
        if v.peak_at is not None and isinstance(v.peak_at.value, (int, float)):
            when = f", {fmt_seconds(float(v.peak_at.value))} into the run"
            if v.peak_step is not None and isinstance(v.peak_step.value, (int, float)):
                of = f" of {v.steps}" if v.steps else ""
                when += f" (step {int(v.peak_step.value)}{of})"
        parts.append(f"peak heap {fmt_value(v.peak_heap.value, 'B', v.peak_heap.reason)}"
                     f"{when}, by {v.peak_heap.source}")
    if v.tensors is not None:
        parts.append(f"torch's tensors at most {fmt_value(v.tensors.value, 'B')} "
                     f"({v.tensors.name}, in the profiled steps, by {v.tensors.source})")
    if v.resident is not None:
        parts.append(f"resident at most {fmt_value(v.resident.value, 'B', v.resident.reason)}"
                     f" (max_rss, by {v.resident.source})")
    return "; ".join(parts) if parts else "no peak was measured"


def resident_line(v: MemoryView) -> str | None:
    """The resident memory over the steps of a run with no profiler."""
    m = v.resident_steps
    if m is None or not m.samples:
        return None
    first, last = m.samples[0], m.samples[-1]
    change = last - first
    return (f"resident after each step ({m.name}, {m.source} run): {_bytes(first)} after the "
            f"first, {_bytes(last)} after the last ({'+' if change >= 0 else '-'}"
            f"{_bytes(abs(change))})")


def relation_line(v: MemoryView) -> str | None:
    """How the peaks shown relate to one another, said once under them."""
    parts = []
    if v.peak_heap is not None:
        parts.append("the heap is what the workload's allocations held (peak_heap)")
    if v.tensors is not None:
        parts.append(f"torch's tensors ({v.tensors.name}) are "
                     + ("part of it" if v.peak_heap is not None else "part of the heap"))
    if v.resident is not None and parts:
        parts.append("the resident memory (max_rss) is what the process held in RAM: the "
                     "heap, plus the code of Python and its libraries and what the allocators "
                     "keep after a free")
    return "; ".join(parts) if len(parts) > 1 else None


def growth_line(v: MemoryView) -> str | None:
    """How much the heap grew a step, and who grew."""
    g = v.growth
    if g is None:
        return None
    who = ", ".join(f"{h.name} {'+' if (h.growth or 0) >= 0 else ''}{_bytes(h.growth)}"
                    for h in v.growing)
    if not isinstance(g.value, (int, float)):
        head = f"the heap's growth a step: {fmt_value(None, 'B', g.reason)}"
    elif g.value > 0:
        head = f"the heap grew {_bytes(float(g.value))} a step"
    else:
        head = "the heap did not grow step over step"
    return head + (f"; growing: {who}" if who else "")


def category_line(v: MemoryView) -> str | None:
    """What held the tensors' peak, by category, in one line."""
    if not v.categories:
        return None
    return "at the tensors' peak: " + ", ".join(
        f"{h.name} {_bytes(h.at_peak)} ({pct(h.share) if h.share is not None else '—'})"
        for h in v.categories)


def cuda_lines(v: MemoryView) -> list[str]:
    """torch's CUDA caching allocator, one line a device."""
    out = []
    for device, reserved, allocated, frag in v.cuda:
        line = f"torch's CUDA allocator on {device} at the end: reserved {_bytes(reserved.value)}"
        if allocated is not None:
            line += f", allocated {_bytes(allocated.value)}"
        if frag is not None and isinstance(frag.value, (int, float)):
            line += f" ({pct(frag.value)} of the unused reserve outside its largest free block)"
        out.append(line)
    return out


def memory_lines(v: MemoryView) -> list[str]:
    """The section's sentences, in order: the peaks, the resident memory over the steps,
    the tensors by category, the growth. (The relation of the peaks comes after the table.)"""
    lines = [peak_line(v), resident_line(v), category_line(v), *cuda_lines(v), growth_line(v)]
    return [ln for ln in lines if ln]


def holder_cells(v: MemoryView) -> list[list[str]]:
    """One row per function that held the most at the peak."""
    return [[h.name, _bytes(h.at_peak), pct(h.share) if h.share is not None else "—",
             _bytes(h.growth) if h.growth is not None and abs(h.growth) >= 1 else "—",
             _bytes(h.at_exit)]
            for h in v.holders]
