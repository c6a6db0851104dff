"""torch's memory categories (``memcats``, saved by the workload) as the memory layer's rows,
the peak's metric and the findings about what dominates it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perfstack.report import Better, Finding, Layer, Metric, Quantity, Row
from perfstack.report.units import fmt_value

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
    "optimizer_state": "keep a smaller optimizer state: a fused or foreach optimizer, "
                       "bf16 or 8-bit states, or sharding it across ranks (ZeRO, FSDP)",
    "parameter": "hold the parameters in bf16/fp16, or shard them across ranks (FSDP)",
    "gradient": "free gradients sooner (zero_grad(set_to_none=True)), accumulate them in "
                "bf16, or shard them across ranks",
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


def memory_categories(folder: Path) -> tuple[list[Row], list[Metric], list[Finding],
                                             list[str]]:
    """Rows (one per device and category), the peak metric per device, the findings and
    notes from the categories the workload saved, or nothing when it saved none."""
    cycle, why = _peak_cycle(folder / MEMORY_SIDECAR)
    if cycle is None:
        return [], [], [], ([f"no memory categories: {why}"] if why else [])
    rows: list[Row] = []
    metrics: list[Metric] = []
    findings: list[Finding] = []
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
    return rows, metrics, findings, ["memory categories from torch.profiler's memory profile "
                                     "of the profiled steps (--torch-memory)"]
