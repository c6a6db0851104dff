"""Where the memory goes, beside where the time goes: the peaks, what held the heap at its
peak, what grew step over step, as every format shows it.

Read from the memory layer (rows valued ``at_peak``, ``growth_per_step``, ``at_exit`` in
bytes) and the metrics that define each peak once: ``peak_heap`` (what the workload's
allocations held at most), ``max_rss`` (what the process held in RAM at most) and
``heap_growth_per_step``; rows of kind ``category`` are what held the tensors' peak
(``torch_peak_memory``) by what they are (activations, parameters...). Whichever backend
measured them; the view names none.
"""

from __future__ import annotations

from perfstack.analysis.origin import workload_dir
from perfstack.analysis.rules.memory import KINDS
from perfstack.analysis.views.layers import display_name
from perfstack.records import datarecord, field
from perfstack.report import Layer, Metric, Report, Row

#: The metrics this view shows (the report's default metrics table leaves them out).
METRICS = ("peak_heap", "peak_heap_at", "peak_heap_step", "heap_growth_per_step",
           "heap_at_exit", "torch_peak_memory", "step_resident", "step_heap", "cuda_reserved",
           "cuda_allocated", "cuda_fragmentation")


#: A function is listed as growing from this many bytes a step.
GROWING = 1024


@datarecord
class Holder:
    """One function's part of the memory."""

    key: str
    name: str  # as shown: 'function (file.py:line)', 'import torch', ...
    at_peak: float | None  # bytes held at the heap's peak
    share: float | None  # of the peak heap, 0..100
    growth: float | None  # bytes more after each step
    at_exit: float | None  # bytes still held when the script ended
    ours: bool


@datarecord
class MemoryView:
    """The peaks, the holders at the peak and what grew."""

    peak_heap: Metric | None
    peak_at: Metric | None
    peak_step: Metric | None
    steps: int | None  # the steps the run made, when the growth was read per step
    resident: Metric | None  # the process's peak resident memory
    growth: Metric | None
    holders: list[Holder]
    growing: list[Holder]
    source: str  # the backend whose rows these are
    tensors: Metric | None = None  # the tensors' peak, whose categories are below
    categories: list[Holder] = field(default_factory=list)  # share: of the tensors' peak
    #: the resident memory after each step of a run with no profiler (samples in step order)
    resident_steps: Metric | None = None
    #: the heap's low point in each step, from the second (samples in step order)
    heap_steps: Metric | None = None
    #: the CUDA caching allocator per device: (device, reserved, allocated, fragmentation)
    cuda: list[tuple[str, Metric, Metric | None, Metric | None]] = field(default_factory=list)


def _value(row: Row, name: str) -> float | None:
    q = row.values.get(name)
    return float(q.value) if q is not None and isinstance(q.value, (int, float)) else None


def memory_view(report: Report, top: int = 5) -> MemoryView | None:
    """The memory view, None when nothing measured where the memory goes."""
    rows = [r for r in report.layers.get(Layer.MEMORY, []) if "at_peak" in r.values]
    peak = report.metric("peak_heap")
    tensors = next((m for m in report.metrics if m.name.startswith("torch_peak_memory")), None)
    per_step = report.metric("step_resident")
    cuda = []
    for m in report.metrics:
        if m.name.startswith("cuda_reserved"):
            suffix = m.name[len("cuda_reserved"):]
            cuda.append((suffix.strip("[]") or "cuda", m,
                         report.metric("cuda_allocated" + suffix),
                         report.metric("cuda_fragmentation" + suffix)))
    if not rows and peak is None and tensors is None and per_step is None and not cuda:
        return None
    home = workload_dir(report)

    def holder(row: Row, of: Metric | None) -> Holder:
        total = float(of.value) if of is not None and isinstance(of.value, (int, float)) \
            else None
        held = _value(row, "at_peak")
        return Holder(row.key, display_name(row, home), held,
                      100 * held / total if held is not None and total else None,
                      _value(row, "growth_per_step"), _value(row, "at_exit"),
                      bool(row.attrs.get("ours")))

    kinds = [r for r in rows if r.attrs.get("kind") == "category"]
    functions = [r for r in rows if r.attrs.get("kind") not in (*KINDS, "cuda-block")]
    by_peak = sorted(functions, key=lambda r: _value(r, "at_peak") or 0.0, reverse=True)
    grown = sorted((r for r in functions if (_value(r, "growth_per_step") or 0.0) >= GROWING),
                   key=lambda r: _value(r, "growth_per_step") or 0.0, reverse=True)
    growth = report.metric("heap_growth_per_step")
    lows = report.metric("step_heap")
    # The low points are steps 2 to N-1 (the first holds the set-up; the script may end
    # just after the last).
    steps = len(lows.samples) + 2 if lows is not None and lows.samples else None
    first = kinds[0].attrs.get("device") if kinds else None
    return MemoryView(
        peak_heap=peak, peak_at=report.metric("peak_heap_at"),
        peak_step=report.metric("peak_heap_step"), steps=steps,
        resident=report.metric("max_rss"), growth=growth,
        holders=[holder(r, peak) for r in by_peak[:top]],
        growing=[holder(r, peak) for r in grown[:3]],
        source=(functions or rows)[0].source if rows else
        (peak.source if peak is not None else ""),
        tensors=tensors,
        categories=[holder(r, tensors) for r in kinds if r.attrs.get("device") == first],
        resident_steps=per_step, heap_steps=lows, cuda=cuda)


def view(report: Report, top: int, full: bool) -> MemoryView | None:
    """The pane's figures (its registered entry, ``perfstack.analysis.panes.PANES``): the
    five largest holders, or ``top`` with ``full``."""
    return memory_view(report, top=5 if not full else max(top, 5))


def shows(name: str) -> bool:
    """Whether the pane shows metric ``name`` (the default metrics table leaves it out)."""
    return name in METRICS
