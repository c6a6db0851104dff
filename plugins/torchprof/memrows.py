"""torch's memory categories (``memcats``, saved by the workload) as the memory layer's rows,
the peak's metric and the findings about what dominates it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perfstack.analysis.rules.memory import KIND_FIXES, OTHER_WORDS
from perfstack.report import Better, Finding, Layer, Metric, Quantity, Row
from perfstack.report.units import fmt_value

from .cudasnap import NO_FRAME
from .memcats import MEMORY_SIDECAR

SOURCE = "torch"
#: A category holding at least this share of torch's peak dominates it.
DOMINANT = 0.5
#: Each category as a title names it.
WORDS = {"activation": "activations", "optimizer_state": "optimizer state",
         "parameter": "parameters", "gradient": "gradients", "temporary": "temporaries",
         "input": "inputs"}
#: What a reader can do when a category dominates the peak.
ACTIONS = {
    "activation": "keep fewer activations: activation checkpointing "
                  "(torch.utils.checkpoint) on the largest blocks, a smaller batch with "
                  "gradient accumulation, or bf16/fp16 autocast",
    **KIND_FIXES,
    "temporary": "fewer temporaries: in-place ops, out= arguments, or torch.compile to fuse "
                 "element-wise chains",
    "input": "smaller input batches, or fewer batches prefetched at once",
}


def _verb(name: str) -> str:
    return "holds" if name == "optimizer_state" else "hold"


def _peak_cycle(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The saved cycle with the highest peak, or None and why."""
    try:
        cycles = json.loads(path.read_text("utf-8"))["cycles"]
    except (OSError, ValueError, KeyError, TypeError):
        return None, None
    errors = [str(c["error"]) for c in cycles if isinstance(c, dict) and "error" in c]
    good = [c for c in cycles if isinstance(c, dict) and isinstance(c.get("devices"), dict)
            and c["devices"]]
    if not good:
        return None, errors[0] if errors else "no tensor memory was recorded"
    best = max(good, key=lambda c: max(d.get("peak", 0) for d in c["devices"].values()))
    return best, None


#: Unused reserve outside its largest free block, from which the allocator is fragmented (%),
#: when the unused reserve is at least this share of the reserve.
FRAGMENTED, UNUSED = 50.0, 0.25
#: ... and the reserve this many times the most the tensors ever used at once: a cache that
#: holds no more than the peak is what a caching allocator is for (freed blocks kept for the
#: next step), not waste (the H200 run: 3.6 GiB reserved, 383 MiB in use at the end, a peak
#: of 7.3 GiB).
OVER_PEAK = 1.25


def cuda_allocator(saved: dict[str, Any]) -> tuple[list[Row], list[Metric], list[Finding]]:
    """The CUDA caching allocator's summary (``cudasnap``): per device, the reserve against
    what is allocated, its fragmentation, and the largest blocks live at the peak by the
    Python line that allocated them; where the device ran out of memory, the blocks live
    that instant (``at_oom``), by line, by what they belonged to and the model's by module."""
    rows: list[Row] = []
    metrics: list[Metric] = []
    findings: list[Finding] = []
    found = saved.get("cuda")
    devices: dict[str, Any] = found if isinstance(found, dict) else {}
    oom = saved.get("cuda_oom")
    if isinstance(oom, dict):  # the out-of-memory observer's snapshot, that instant
        device = str(oom.get("device", "cuda:0"))
        for block in oom.get("held", []):
            where = str(block.get("where", NO_FRAME))
            rows.append(Row(where, where, SOURCE,  # (one device's: the one that ran out)
                            {"at_oom": Quantity(int(block.get("size", 0)), "B")},
                            {"kind": "cuda-oom-block", "device": device}))
        for name, size in (oom.get("modules") or {}).items():
            rows.append(Row(f"{device} out of memory: module {name}", name, SOURCE,
                            {"at_oom": Quantity(int(size), "B")},
                            {"kind": "oom-module", "device": device}))
        for name, size in (oom.get("categories") or {}).items():
            rows.append(Row(f"{device} out of memory: {name}", WORDS.get(name, OTHER_WORDS), SOURCE,
                            {"at_oom": Quantity(int(size), "B")},
                            {"kind": "oom-category", "device": device, "category": name}))
    for device, d in sorted(devices.items()):
        suffix = "" if len(devices) == 1 else f"[{device}]"
        reserved, allocated = int(d.get("reserved", 0)), int(d.get("allocated", 0))
        metrics += [
            Metric(f"cuda_reserved{suffix}", reserved, "B", Layer.MEMORY, SOURCE, Better.LOWER,
                   description=f"what torch's caching allocator held from CUDA on {device} "
                   "when the script ended (cudaMalloc'd segments)"),
            Metric(f"cuda_allocated{suffix}", allocated, "B", Layer.MEMORY, SOURCE,
                   Better.LOWER, detail=True,
                   description=f"of that reserve, what tensors used on {device} then"),
            Metric(f"cuda_fragmentation{suffix}", d.get("fragmentation"), "%", Layer.MEMORY,
                   SOURCE, Better.LOWER, detail=True,
                   reason=None if d.get("fragmentation") is not None else "no unused reserve",
                   description="the share of the unused reserve outside its largest free "
                   "block: memory a large tensor cannot use"),
        ]
        if d.get("peak_allocated") is not None:
            metrics.append(Metric(
                f"cuda_peak_allocated{suffix}", int(d["peak_allocated"]), "B", Layer.MEMORY,
                SOURCE, Better.LOWER, description=f"the most tensors used at once on {device} "
                "while the allocator recorded (its trace replayed)"))
        for block in d.get("at_peak", []):
            where = str(block.get("where", "?"))
            if where == "?":  # a summary of an older perfstack's
                where = NO_FRAME
            rows.append(Row(f"{device} block {where}", where, SOURCE,
                            {"at_peak": Quantity(int(block.get("size", 0)), "B")},
                            {"kind": "cuda-block", "device": device}))
        unused = reserved - allocated
        frag = d.get("fragmentation")
        peak = d.get("peak_allocated")
        beyond_peak = isinstance(peak, int) and reserved > OVER_PEAK * peak
        if (reserved and unused >= UNUSED * reserved and frag is not None
                and frag >= FRAGMENTED and beyond_peak):
            findings.append(Finding(
                "memory.fragmented", f"torch's CUDA allocator on {device} holds "
                f"{fmt_value(unused, 'B')} it does not use, {frag:.0f}% of it in pieces "
                "smaller than its largest free block", Layer.MEMORY, "warning",
                [f"reserved {fmt_value(reserved, 'B')}, allocated {fmt_value(allocated, 'B')}"
                 f", largest free block {fmt_value(int(d.get('largest_free', 0)), 'B')}; "
                 f"the most in use at once {fmt_value(int(peak or 0), 'B')}: it reserved "
                 f"{reserved / max(int(peak or 1), 1):.1f}x what it ever needed"],
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow instead of "
                "splitting; allocate the largest tensors first, or reuse them", SOURCE))
    return rows, metrics, findings


def memory_categories(folder: Path) -> tuple[list[Row], list[Metric], list[Finding],
                                             list[str]]:
    """Rows (one per device and category), the peak metric per device, the findings and
    notes from the categories the workload saved, or nothing when it saved none; on a GPU
    the caching allocator's summary too."""
    try:
        saved = json.loads((folder / MEMORY_SIDECAR).read_text("utf-8"))
    except (OSError, ValueError):
        saved = {}
    rows, metrics, findings = cuda_allocator(saved if isinstance(saved, dict) else {})
    said = {"cuda_error": "CUDA allocator snapshot", "cuda_oom_error": "CUDA allocator "
            "snapshot when the device ran out of memory", "cuda_oom_owners_error": "what the "
            "live blocks belonged to when the device ran out of memory"}
    notes = [f"{words}: {saved[key]}" for key, words in said.items()
             if isinstance(saved, dict) and saved.get(key)]
    cycle, why = _peak_cycle(folder / MEMORY_SIDECAR)
    if cycle is None:
        return rows, metrics, findings, notes + ([f"no memory categories: {why}"] if why
                                                 else [])
    devices = cycle["devices"]
    for device, data in sorted(devices.items()):
        peak = int(data.get("peak", 0))
        suffix = "" if len(devices) == 1 else f"[{device}]"
        metrics.append(Metric(
            f"torch_peak_memory{suffix}", peak, "B", Layer.MEMORY, SOURCE, Better.LOWER,
            description=f"the most torch's tensors held at once on {device} in the profiled "
            "steps, as torch.profiler's memory profile counts it; its categories add up to it"))
        held = {str(k): int(v) for k, v in (data.get("categories") or {}).items()}
        most = {str(k): int(v) for k, v in (data.get("most") or {}).items()}
        for name, size in sorted(held.items(), key=lambda kv: -kv[1]):
            rows.append(Row(f"{device} {name}", name.replace("_", " "), SOURCE,
                            {"at_peak": Quantity(size, "B"),
                             "most": Quantity(most.get(name, size), "B")},
                            {"kind": "category", "device": device, "category": name}))
        if held and peak:
            name, size = max(held.items(), key=lambda kv: kv[1])
            if size >= DOMINANT * peak and name in ACTIONS:
                findings.append(Finding(
                    f"memory.{name}", f"{WORDS[name]} {_verb(name)} {100 * size / peak:.0f}% "
                    f"of torch's peak memory on {device}",
                    Layer.MEMORY, "warning",
                    [f"at the peak ({fmt_value(peak, 'B')}): " + ", ".join(
                        f"{k.replace('_', ' ')} {fmt_value(v, 'B')}"
                        for k, v in sorted(held.items(), key=lambda kv: -kv[1]))],
                    ACTIONS[name], SOURCE))
    return rows, metrics, findings, [*notes, "memory categories from torch.profiler's memory "
                                     "profile of the profiled steps (--torch-memory)"]
