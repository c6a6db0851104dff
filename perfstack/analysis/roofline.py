"""How close each op runs to the machine: its FLOP/s and bytes/s against the ceilings.

A row with a cost (``flops`` and/or ``bytes`` values, its arithmetic type in
``attrs["dtype"]``, as the torch backend gives framework and kernel rows) and a time is
placed on the roofline of its device (``environment["ceilings"]``: this machine's, measured,
or a recorded GPU's datasheet): its arithmetic intensity (FLOPs per byte), the roof it can
reach at that intensity (the peak of its type, or the bandwidth times its intensity,
whichever is lower), its share of that roof, and what bounds it:

- ``compute``: its intensity is at or above the ridge (peak / bandwidth);
- ``memory``: below the ridge, the bytes set its roof;
- ``cache``: below the ridge, but what one call moves fits in the CPU's last-level cache, so
  it can run above the memory roof (its share may pass 100%): its data is served by the
  caches, not by memory;
- ``latency``: its calls are too small for either roof to matter: the work of one call at
  the roof would take less than the fixed cost of a call (the measured dispatch floor on a
  CPU; ``GPU_FLOOR_S`` for a kernel).

A row's time is its device time on a GPU, else its inclusive (total) time. Sums over ops
leave out the rows whose cost is counted in the op they ran in (``cost_in_caller``).
"""

from __future__ import annotations

from typing import Any

from perfstack.machine.roofline.ceilingrecord import Ceilings
from perfstack.records import datarecord
from perfstack.report import Better, Layer, Metric, Report, Row

SOURCE = "perfstack"
#: The row value that holds an op's share of its roof (%).
ROOF = "roof"
#: A GPU kernel's fixed cost (launch to first instruction, ramp-up and drain): a few
#: microseconds on the GPUs of docs/roofline.md; kernels doing less than this much work at
#: the roof are latency-bound.
GPU_FLOOR_S = 4e-6
#: An op is heavy when it holds this share of the costed op time.
HEAVY = 0.05
#: ... and far below its roof under this share of it.
FAR_BELOW = 0.25
#: Memory-bound element-wise work above this share of the costed op time is worth fusing.
FUSE_SHARE = 0.20
#: A matrix product with a side shorter than this is small for a machine's vector units.
SMALL = 64
#: A type whose measured peak is this many times fp32's is worth moving compute to.
FASTER_TYPE = 1.5
#: A compute-bound op at this many times its roof means the roof is low, not the op fast.
DOUBT = 1.05


@datarecord
class Placement:
    """One row on its device's roofline."""

    row: Row
    layer: Layer
    device: str
    seconds: float
    calls: int | None
    flops: float | None
    bytes: float | None
    dtype: str | None
    peak: float | None  # FLOP/s of its type (None: unknown)
    peak_name: str | None
    bandwidth: float | None
    bound: str  # compute | memory | latency | unknown
    share: float | None  # of the roof it can reach at its intensity (0..1+)

    @property
    def flop_s(self) -> float | None:
        """Achieved FLOP/s."""
        return self.flops / self.seconds if self.flops is not None else None

    @property
    def byte_s(self) -> float | None:
        """Achieved bytes/s."""
        return self.bytes / self.seconds if self.bytes is not None else None

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte moved."""
        if self.flops is None or not self.bytes:
            return None
        return self.flops / self.bytes

    def as_attrs(self) -> dict[str, Any]:
        """The figures a row carries in ``attrs["roofline"]``."""
        out: dict[str, Any] = {"device": self.device, "bound": self.bound,
                               "seconds": self.seconds}
        for name, value in (("flop_s", self.flop_s), ("byte_s", self.byte_s),
                            ("intensity", self.intensity), ("peak_flop_s", self.peak),
                            ("bandwidth", self.bandwidth)):
            if value is not None:
                out[name] = value
        if self.peak_name:
            out["peak_type"] = self.peak_name
        if self.share is not None:
            out["roof_share"] = 100 * self.share
        return out


def ceilings_of(report: Report) -> dict[str, Ceilings]:
    """The report's ceilings by device (``cpu``, ``gpu``); a malformed entry is left out."""
    found = report.environment.get("ceilings")
    out: dict[str, Ceilings] = {}
    if isinstance(found, dict):
        for device, data in found.items():
            if isinstance(data, dict):
                try:
                    out[str(device)] = Ceilings.from_dict(data)
                except ValueError:
                    continue
    return out


def _value(row: Row, name: str) -> float | None:
    q = row.values.get(name)
    if q is None or isinstance(q.value, bool) or not isinstance(q.value, (int, float)):
        return None
    return float(q.value)


#: What ran fp32 on a GPU's tensor cores (TF32) when the workload's torch did not say:
#: torch's defaults, cuDNN's convolutions yes, matrix products no.
TF32_DEFAULT = frozenset({"conv"})


def tf32_allowed(environment: dict[str, Any]) -> frozenset[str]:
    """Which fp32 GPU ops the workload let run in TF32 (``conv``, ``matmul``), from the
    torch it ran with (its settings at its end; a report's environment), else torch's
    defaults."""
    torch = environment.get("torch")
    facts = torch if isinstance(torch, dict) else {}
    out = set(TF32_DEFAULT)
    for kind, fact in (("conv", "cudnn_allow_tf32"), ("matmul", "matmul_allow_tf32")):
        if isinstance(facts.get(fact), bool):
            (out.add if facts[fact] else out.discard)(kind)
    return frozenset(out)


def _tf32_kind(name: str) -> str | None:
    low = name.lower()
    if "conv" in low:
        return "conv"
    if any(op in low for op in ("::mm", "addmm", "bmm", "matmul", "linear", "baddbmm")):
        return "matmul"
    return None


def place(row: Row, layer: Layer, ceilings: dict[str, Ceilings],
          tf32: frozenset[str] = TF32_DEFAULT) -> Placement | None:
    """Put one row on its roofline, or None when it has no cost, no time or no ceilings.
    ``tf32``: the fp32 GPU ops (``conv``, ``matmul``) the workload let run on the tensor
    cores, measured against the TF32 peak where the ceilings have one."""
    flops, moved = _value(row, "flops"), _value(row, "bytes")
    if (flops is None and moved is None) or row.attrs.get("transfer"):
        return None  # no cost, or a copy between host and device (its roof is the link's)
    device_s = _value(row, "device")
    if device_s:
        device, seconds = "gpu", device_s
    else:
        device, seconds = "cpu", _value(row, "total") or 0.0
    ceiling = ceilings.get(device)
    if ceiling is None or seconds <= 0:
        return None
    dtype = row.attrs.get("dtype") if isinstance(row.attrs.get("dtype"), str) else None
    peak_name = dtype if dtype in ceiling.peak_flops else None
    peak = ceiling.peak_flops.get(peak_name) if peak_name else None
    tensor_cores = row.attrs.get("tensor_cores") or (
        peak is not None and flops and flops / seconds > peak) or (  # faster than fp32 runs
        device == "gpu" and _tf32_kind(row.name) in tf32)
    if dtype == "fp32" and tensor_cores and "tf32" in ceiling.peak_flops:
        peak_name, peak = "tf32", ceiling.peak_flops["tf32"]  # tensor cores ran it in TF32
    calls = _value(row, "calls")
    bound, share = _bound(flops or 0.0, moved, seconds, int(calls) if calls else None, peak,
                          ceiling, device)
    return Placement(row, layer, device, seconds, int(calls) if calls else None, flops, moved,
                     dtype, peak, peak_name, ceiling.bandwidth, bound, share)


def _bound(flops: float, moved: float | None, seconds: float, calls: int | None,
           peak: float | None, ceiling: Ceilings, device: str) -> tuple[str, float | None]:
    """What bounds an op, and its share of the roof it can reach."""
    bandwidth = ceiling.bandwidth
    at_peak = flops / peak if peak and flops else 0.0
    at_bandwidth = moved / bandwidth if moved is not None and bandwidth else 0.0
    ideal = max(at_peak, at_bandwidth)
    if not ideal:
        return "unknown", None
    share = ideal / seconds
    floor = GPU_FLOOR_S if device == "gpu" else ceiling.dispatch_s
    if floor and calls and ideal / calls < floor:
        return "latency", share
    if flops and peak and moved and bandwidth and flops / moved >= peak / bandwidth:
        return "compute", share
    if at_bandwidth:
        cache = _last_level_cache(ceiling)
        fits = device == "cpu" and cache and calls and (moved or 0) / calls <= cache
        return ("cache" if fits else "memory"), share
    return "unknown", share


def _last_level_cache(ceiling: Ceilings) -> float | None:
    """The CPU's last-level cache in bytes, as the probe found it."""
    memory = ceiling.how.get("memory")
    found = memory.get("last_level_cache") if isinstance(memory, dict) else None
    return float(found) if isinstance(found, (int, float)) and found > 0 else None


def placements(report: Report, ceilings: dict[str, Ceilings]) -> list[Placement]:
    """Every costed framework and kernel row of the report on its roofline."""
    if not ceilings:
        return []
    out = []
    tf32 = tf32_allowed(report.environment)
    for layer in (Layer.FRAMEWORK, Layer.KERNEL):
        for row in report.layers[layer]:
            found = place(row, layer, ceilings, tf32)
            if found is not None:
                out.append(found)
    return out


def summary(ops: list[Placement], report: Report) -> list[Metric]:
    """The step's figures over its costed ops (each counted once)."""
    timed = [p for p in ops if p.share is not None]
    if not timed:
        why = _why_none(report)
        return [] if why is None else [Metric(
            "roofline.peak_share", None, "%", Layer.HARDWARE, SOURCE, Better.HIGHER,
            reason=why, description="the ops with a known cost ran at this share of the "
            "machine's peak FLOP/s (each at its type's peak, weighted by time)")]
    total = sum(p.seconds for p in timed)
    at_peak = sum(p.flops / p.peak for p in timed if p.flops and p.peak)
    memory = sum(p.seconds for p in timed if p.bound in ("memory", "cache"))
    latency = sum(p.seconds for p in timed if p.bound == "latency")
    device = timed[0].device
    out = [
        Metric("roofline.peak_share", 100 * at_peak / total, "%", Layer.HARDWARE, SOURCE,
               Better.HIGHER, description="the ops with a known cost ran at this share of "
               "the machine's peak FLOP/s (each at its type's peak, weighted by time)"),
        Metric("roofline.memory_bound_share", 100 * memory / total, "%", Layer.HARDWARE,
               SOURCE, Better.NEITHER, detail=True,
               description="share of the costed op time in memory-bound ops (their data in "
               "memory or in the caches)"),
        Metric("roofline.latency_bound_share", 100 * latency / total, "%", Layer.HARDWARE,
               SOURCE, Better.LOWER, detail=True,
               description="share of the costed op time in calls too small for either roof "
               "(the fixed cost of a call dominates)"),
    ]
    covered = _op_time(report, device)
    if covered:
        out.append(Metric("roofline.coverage", min(100.0, 100 * total / covered), "%",
                          Layer.HARDWARE, SOURCE, Better.NEITHER, detail=True,
                          description="share of the op time whose cost is known (the rest "
                          "is in ops no formula covers)"))
    return out


def _why_none(report: Report) -> str | None:
    """Why no op is on a roofline, when the report has ops or ceilings to expect one."""
    rows = report.layers[Layer.FRAMEWORK]
    has_cost = any("flops" in r.values or "bytes" in r.values for r in rows)
    if has_cost:
        why = report.environment.get("ceilings_unknown")
        return (f"unknown: {why}" if isinstance(why, str) else
                "unknown: no ceilings for the device the ops ran on")
    if report.environment.get("ceilings") and rows:
        if not any(r.attrs.get("input_dims") for r in rows):
            return ("unknown: the trace records no input shapes (record_shapes was off), so "
                    "no op's FLOPs or bytes are known")
        return "unknown: no op of a kind with a cost formula (docs/roofline.md)"
    return None


def _op_time(report: Report, device: str) -> float:
    """All op time of the report's framework rows that carry costs: their self times (each
    moment counted once), device times on a GPU."""
    sources = {r.source for r in report.layers[Layer.FRAMEWORK] if "flops" in r.values
               or "bytes" in r.values}
    name = "device" if device == "gpu" else "self"
    return sum(_value(r, name) or 0.0 for r in report.layers[Layer.FRAMEWORK]
               if r.source in sources)
