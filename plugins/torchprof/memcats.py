"""torch's memory categories at the peak, computed inside the workload process from the
profiler that just recorded (``--torch-memory``).

torch.profiler's memory profile (``torch.profiler._memory_profiler``, the analysis behind
``export_memory_timeline``) follows every tensor's storage through the autograd graph and
names what it is: a parameter, a gradient, optimizer state, an activation saved for the
backward pass, an input, a temporary, autograd's own detail, or (where it cannot tell)
unknown. Here its timeline is summed per device, and the moment its total is highest is the
peak: the categories then add up to that total. Only torch and the standard library are
imported: this runs in the workload.
"""

from __future__ import annotations

from typing import Any

#: The sidecar the categories are saved in, per profiling cycle.
MEMORY_SIDECAR = "torch-memory.json"


def _label(category: Any) -> str:
    return "unknown" if category is None else str(category.name).lower()


def categories(prof: Any) -> dict[str, Any]:
    """Return, per device, torch's peak memory in the recorded steps and what it held by
    category then: ``{"cpu": {"peak": bytes, "at_us": t, "categories": {name: bytes}}}``.
    Requires a profiler run with ``profile_memory``, ``record_shapes`` and ``with_stack``."""
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline

    timeline = MemoryProfileTimeline(prof._memory_profile())
    names = [_label(c) for c in _CATEGORY_TO_INDEX]  # sizes[i + 1] is names[i]
    devices = sorted({str(key.device) for _, _, (key, _), _ in timeline.timeline})
    out: dict[str, Any] = {}
    for device in devices:
        times, sizes = timeline._coalesce_timeline(device)  # type: ignore[no-untyped-call]
        if not sizes:
            continue
        totals = [sum(row[1:]) for row in sizes]
        at = max(range(len(totals)), key=totals.__getitem__)
        out[device] = {
            "peak": totals[at], "at_us": times[at],
            "categories": {name: sizes[at][i + 1] for i, name in enumerate(names)
                           if sizes[at][i + 1]},
            "most": {name: max(row[i + 1] for row in sizes) for i, name in enumerate(names)},
        }
    return out
