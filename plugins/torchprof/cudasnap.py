"""torch's CUDA caching allocator, summarised from its memory snapshot (``--torch-memory`` on a
GPU): reserved against allocated, how broken up the unused reserve is, and the largest blocks
live at the peak with the Python line that allocated each.

The snapshot is the dictionary ``torch.cuda.memory._snapshot()`` returns after
``torch.cuda.memory._record_memory_history()`` (its format is documented in
``torch/cuda/memory.py``): ``segments`` (what cudaMalloc gave the allocator, each split into
``blocks`` with a ``state``) and ``device_traces`` (every alloc and free it made, with the
stack). The peak is found by replaying the trace: it holds every allocation the allocator
made while recording, a library's own too (cuDNN's workspace while it benchmarks, which on an
H200 made the run's peak 7.3 GiB where torch's profiler, in its few steps, saw 2.8). Read on a
real H200 run (tests/fixtures/gpu-runs/memory). Where the device runs out, the allocator's
out-of-memory observer takes a snapshot that instant (``at_oom``: the live blocks by line;
not yet read on a GPU: tests/fixtures/gpu-runs/record.sh's "loops" records one). Standard
library only: it runs in the workload.
"""

from __future__ import annotations

from typing import Any

#: Blocks listed at the peak.
TOP = 5


#: A block allocated with no Python frame on its stack: a library's own (cuDNN's workspace
#: while it benchmarks its algorithms, cuBLAS's), not a tensor of the workload's.
NO_FRAME = "(no Python frame: a library's own, such as cuDNN's workspace)"


def block_site(frames: Any) -> str:
    """The innermost frame of the workload's Python code (not torch's), as 'name
    (file:line)'; ``NO_FRAME`` without Python frames."""
    if not isinstance(frames, list):
        return NO_FRAME
    python = [f for f in frames if isinstance(f, dict) and str(f.get("filename", "")).endswith(
        ".py")]
    for f in python:
        name = str(f.get("filename", ""))
        if "/torch/" not in name and "site-packages" not in name:
            return f"{f.get('name', '?')} ({name}:{f.get('line', 0)})"
    if python:
        f = python[0]
        return f"{f.get('name', '?')} ({f.get('filename', '?')}:{f.get('line', 0)})"
    return NO_FRAME


def peak_blocks(trace: list[dict[str, Any]]) -> tuple[int | None, list[dict[str, Any]]]:
    """Replay one device's allocator trace: the most allocated at once, and the blocks live
    then (largest first)."""
    live: dict[Any, dict[str, Any]] = {}
    total = best = 0
    at_best: list[dict[str, Any]] = []
    seen = False
    for entry in trace:
        action, addr, size = entry.get("action"), entry.get("addr"), int(entry.get("size", 0))
        if action == "alloc":
            seen = True
            live[addr] = entry
            total += size
            if total > best:
                best, at_best = total, list(live.values())
        elif action == "free_completed" and addr in live:
            total -= int(live.pop(addr).get("size", 0))
    if not seen:
        return None, []
    return best, sorted(at_best, key=lambda e: -int(e.get("size", 0)))


def by_site(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks' sizes summed by the Python line that allocated them, the ``TOP`` largest
    first, each ``{"size", "where"}``."""
    merged: dict[str, int] = {}
    for block in blocks:
        where = block_site(block.get("frames"))
        merged[where] = merged.get(where, 0) + int(block.get("size", 0))
    return [{"size": size, "where": where}
            for where, size in sorted(merged.items(), key=lambda kv: -kv[1])[:TOP]]


def summarize(snapshot: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per device (``"cuda:N"``): ``reserved`` and ``allocated`` now (bytes), ``largest_free``
    (the biggest unused block), ``fragmentation`` (the share of the unused reserve outside that
    block, %; None with no unused reserve), ``peak_allocated`` (from the trace; None without
    one) and ``at_peak``: the largest blocks live then, each ``{"size", "where"}``."""
    out: dict[str, dict[str, Any]] = {}
    for segment in snapshot.get("segments", []):
        device = f"cuda:{segment.get('device', 0)}"
        d = out.setdefault(device, {"reserved": 0, "allocated": 0, "largest_free": 0})
        d["reserved"] += int(segment.get("total_size", 0))
        for block in segment.get("blocks", []):
            size = int(block.get("size", 0))
            if block.get("state") == "active_allocated":
                d["allocated"] += size
            elif block.get("state") == "inactive":
                d["largest_free"] = max(d["largest_free"], size)
    for index, trace in enumerate(snapshot.get("device_traces", [])):
        d = out.setdefault(f"cuda:{index}", {"reserved": 0, "allocated": 0, "largest_free": 0})
        peak, blocks = peak_blocks(trace if isinstance(trace, list) else [])
        d["peak_allocated"] = peak
        d["at_peak"] = by_site(blocks)
    for d in out.values():
        unused = d["reserved"] - d["allocated"]
        d["fragmentation"] = (round(100 * (unused - d["largest_free"]) / unused, 1)
                              if unused > 0 else None)
        d.setdefault("peak_allocated", None)
        d.setdefault("at_peak", [])
    return out


def owned(segments: list[dict[str, Any]], device: int, owners: dict[int, str],
          rest: str | None = "other") -> dict[str, int]:
    """The live blocks on ``device`` summed by what they belonged to: ``owners`` maps a
    storage's address to its owner (a category in torch's names: parameter, gradient,
    optimizer_state; or the module that holds it); a block no owner starts is ``rest``
    (activations, inputs, temporaries), or left out where ``rest`` is None. A block's address
    is its segment's plus the sizes of the blocks before it (the blocks tile the segment, as
    torch's memory viewer lays them out)."""
    out: dict[str, int] = {}
    for segment in segments:
        if int(segment.get("device", 0)) != device:
            continue
        address = int(segment.get("address", 0))
        for block in segment.get("blocks", []):
            start, size = int(block.get("address", address)), int(block.get("size", 0))
            name = owners.get(start, rest)
            if block.get("state") == "active_allocated" and name is not None:
                out[name] = out.get(name, 0) + size
            address = start + size
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def at_oom(snapshot: dict[str, Any], device: int, asked: int, free: int,
           owners: tuple[dict[int, str], dict[int, str]] | None = None) -> dict[str, Any]:
    """What the allocator held on ``device`` the instant it ran out (``snapshot`` taken by the
    out-of-memory observer; ``asked``: the allocation refused, ``free``: what the device had
    free): reserved, allocated, the largest free block and fragmentation as ``summarize``
    says them, ``held``: the live blocks by the Python line that allocated them, and, given
    the ``owners`` of the live tensors' storages (their kinds, and the modules that hold the
    model's), ``categories`` and ``modules``: the live blocks by kind and by module
    (``owned``)."""
    segments = snapshot.get("segments", [])
    live = [block for segment in segments if int(segment.get("device", 0)) == device
            for block in segment.get("blocks", []) if block.get("state") == "active_allocated"]
    # (the segments alone: the trace's replay, for the peak, is not wanted here)
    now = summarize({"segments": segments}).get(f"cuda:{device}", {})
    found: dict[str, Any] = {}
    if owners is not None:
        kinds, modules = owners
        found["categories"] = owned(segments, device, kinds)
        found["modules"] = owned(segments, device, modules, rest=None)
    return {"device": f"cuda:{device}", "asked": asked, "free": free,
            **{k: now.get(k) for k in ("reserved", "allocated", "largest_free",
                                       "fragmentation")},
            "held": by_site(live), **found}
