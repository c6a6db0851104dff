"""The roofline's findings, and the step that puts the roofline on a report: each costed row
placed against its device's ceilings (``perfstack.analysis.roofline``), the step's figures,
and what to say of the ops that run far below their roof, in calls too small for this
machine, or at a slower type than the machine has."""

from __future__ import annotations

from perfstack.analysis.roofline import (
    DOUBT,
    FAR_BELOW,
    FASTER_TYPE,
    FUSE_SHARE,
    HEAVY,
    ROOF,
    SMALL,
    SOURCE,
    Placement,
    ceilings_of,
    placements,
    summary,
)
from perfstack.machine.load import DISTURBED_CPUS
from perfstack.machine.roofline.ceilingrecord import Ceilings
from perfstack.report import Finding, Layer, Metric, Quantity, Report, Row
from perfstack.report.units import fmt_seconds, fmt_si, pct_fine


def annotate(report: Report) -> tuple[list[Metric], list[Finding]]:
    """Put each costed row's figures in ``attrs["roofline"]``; return the step's figures and
    the findings."""
    ceilings = ceilings_of(report)
    placed = placements(report, ceilings)
    for p in placed:
        p.row.attrs["roofline"] = p.as_attrs()
        if p.share is not None:  # the column every format's tables show
            p.row.values[ROOF] = Quantity(100 * p.share, "%")
    ops = [p for p in placed if p.layer == Layer.FRAMEWORK
           and not p.row.attrs.get("cost_in_caller")]
    return summary(ops, report), findings(ops, ceilings)


def findings(ops: list[Placement], ceilings: dict[str, Ceilings]) -> list[Finding]:
    """Heavy ops far below their roof, memory-bound element-wise work worth fusing, fp32
    compute where the machine has a faster type."""
    timed = [p for p in ops if p.share is not None]
    total = sum(p.seconds for p in timed)
    if not total:
        return []
    # a cache-bound op's roof is its cache's, which is not measured: no verdict on it
    far = [p for p in sorted(timed, key=lambda p: -p.seconds)
           if p.bound in ("compute", "memory") and p.seconds / total >= HEAVY
           and p.share is not None and p.share < FAR_BELOW][:5]
    out = _far_below(far, total)
    groups = (
        ("roofline.latency-bound", [p for p in timed if p.bound == "latency"],
         "of the costed op time is in calls too small for this machine",
         "batch them (more work per call) or fuse them (torch.compile, CUDA graphs on a GPU): "
         "the fixed cost of each call, not the machine, sets their time"),
        ("roofline.fuse-elementwise",
         [p for p in timed if p.bound in ("memory", "cache") and _elementwise(p.row)],
         "of the costed op time is memory-bound element-wise work",
         "fuse them: torch.compile turns a chain of element-wise ops into one pass over memory"),
    )
    for rule, members, what, action in groups:
        share = sum(p.seconds for p in members) / total
        if share >= FUSE_SHARE:
            out.append(Finding(rule, f"{100 * share:.0f}% {what}", Layer.FRAMEWORK.value, "info",
                               _heaviest(members, total), action, SOURCE))
    out.extend(_faster_type(timed, total, ceilings))
    return [*_ceiling_low(timed, ceilings), *_bandwidth_low(timed), *out]


def _op_name(row: Row) -> str:
    """An op's name without its input shapes (the evidence gives them): a title cut inside
    a shape list read '[[8, 4, 128, 64], [8, 4,  ran at'."""
    name = row.attrs.get("op") if isinstance(row.attrs.get("op"), str) else None
    return name or row.name.split(" [", 1)[0]


def _ceiling_low(timed: list[Placement], ceilings: dict[str, Ceilings]) -> list[Finding]:
    """Compute-bound ops above their roof: the ceiling is wrong (measured under load, or
    the type's peak not measured), and every share of it with it. Said, never left
    standing as a figure."""
    above = sorted((p for p in timed if p.bound == "compute" and p.share is not None
                    and p.share > DOUBT), key=lambda p: -(p.share or 0.0))
    if not above:
        return []
    kind = above[0].device
    ceiling = ceilings.get(kind)
    how = ceiling.how if ceiling is not None else {}
    measured = [m for m in how.get("measurements") or [how] if isinstance(m, dict)]
    others = [float(m["load"].get("others_cpus") or 0.0) for m in measured
              if isinstance(m.get("load"), dict)]
    busy = [o for o in others if o > DISTURBED_CPUS]
    when = (f"measured {len(measured)} time(s)" + (
        f", {len(busy)} of them while other programs kept CPUs busy (up to "
        f"{max(busy):.1f})" if busy else ""))
    top = above[0]
    return [Finding(
        "roofline.ceiling-low",
        f"{len(above)} op{'' if len(above) == 1 else 's'} above "
        f"{'its' if len(above) == 1 else 'their'} roof (up to {percent(top.share or 0.0)} of "
        f"the {top.peak_name or 'compute'} peak): "
        "perfstack's type or ceiling is wrong, and the shares with it",
        Layer.HARDWARE.value, "warning",
        [_above_words(p) for p in above[:3]]
        + [f"the {kind} ceilings were {when}"],
        "if the op ran in a faster type than its inputs' (tensor cores, a library's own "
        "choice), its roof is that type's; else measure the ceilings again alone: perfstack "
        "env --measure-ceilings (perfstack keeps the best of its measurements); until then "
        "read the roofline's shares as relative, not absolute", SOURCE)]


def _bandwidth_low(timed: list[Placement]) -> list[Finding]:
    """Memory-bound ops above the bandwidth roof: the ceiling is the probe's copy (a read and
    a write of each byte), which a write-only fill or a read-only reduction can pass; the
    shares of memory-bound ops are relative until it is measured for such a stream."""
    above = sorted((p for p in timed if p.bound == "memory" and p.share is not None
                    and p.share > DOUBT and p.bandwidth), key=lambda p: -(p.share or 0.0))
    if not above:
        return []
    top = above[0]
    return [Finding(
        "roofline.bandwidth-low",
        f"{len(above)} memory-bound op{'' if len(above) == 1 else 's'} above the memory roof "
        f"(up to {percent(top.share or 0.0)} of {fmt_si(top.bandwidth or 0.0, 'B/s')}): "
        "perfstack's bandwidth ceiling is low for them",
        Layer.HARDWARE.value, "info",
        [f"{_op_name(p.row)[:40]}: {percent(p.share or 0.0)} of the memory roof "
         f"({fmt_si(p.bandwidth or 0.0, 'B/s')}), {p.dtype or 'no type recorded'}"
         for p in above[:3]],
        "the ceiling is a copy's, each byte read and written; a fill that only writes (or a "
        "reduction that only reads) can move more: read memory-bound shares as relative, not "
        "absolute", SOURCE)]


def _above_words(p: Placement) -> str:
    """One op above its roof: which op, in which type the trace records it, which ceiling
    it was held to."""
    peak = f" ({fmt_si(p.peak, 'flop/s')})" if p.peak else ""
    typed = f"{p.dtype} inputs" if p.dtype else "no type recorded"
    return (f"{_op_name(p.row)[:40]}: {percent(p.share or 0.0)} of the "
            f"{p.peak_name or 'compute'} roof{peak}, {typed}")


def _heaviest(ops: list[Placement], total: float) -> list[str]:
    """The evidence of a group of ops: the heaviest three, each with its share."""
    top = sorted(ops, key=lambda p: -p.seconds)[:3]
    lines = [f"{p.row.name[:70]}: {100 * p.seconds / total:.0f}%, {_roof_words(p)}"
             for p in top]
    if len(ops) > len(top):
        lines.append(f"and {len(ops) - len(top)} more op shapes")
    return lines


def _roof_words(p: Placement) -> str:
    """An op's share of its roof; a cache-bound op's is of the memory roof, which its data,
    served by the caches, may pass (hence shares over 100%)."""
    if p.bound == "cache":
        return f"{percent(p.share)} of the memory roof (its data fits in the cache)"
    return f"{percent(p.share)} of its roof"


def percent(share: float | None) -> str:
    """A share (0..1) of a roof as the report writes percentages."""
    return "unknown" if share is None else pct_fine(100 * share)


def _faster_type(timed: list[Placement], total: float,
                 ceilings: dict[str, Ceilings]) -> list[Finding]:
    """fp32 compute that a lower precision would run faster. On a GPU, fp32 convolutions and
    matmuls the workload let run in TF32 are measured against the TF32 peak: their gain from
    bf16 is bf16 over TF32, not over plain fp32 (an H200: 2x, not 15x)."""
    fp32 = [p for p in timed if p.dtype == "fp32" and p.bound == "compute"]
    share = sum(p.seconds for p in fp32) / total
    if not fp32 or share < FUSE_SHARE:
        return []
    ceiling = ceilings.get(fp32[0].device)
    if ceiling is None or "fp32" not in ceiling.peak_flops:
        return []
    in_tf32 = sum(p.seconds for p in fp32 if p.peak_name == "tf32")
    mostly_tf32 = in_tf32 * 2 >= sum(p.seconds for p in fp32) and "tf32" in ceiling.peak_flops
    base_name = "tf32" if mostly_tf32 else "fp32"
    base = ceiling.peak_flops[base_name]
    better = {t: v / base for t, v in ceiling.peak_flops.items()
              if t in ("bf16", "fp16") and v >= FASTER_TYPE * base}
    if not better:
        return []
    best = max(better, key=lambda t: better[t])
    evidence = [f"peak {base_name} {_rate(base)}, {best} {_rate(ceiling.peak_flops[best])} "
                f"({ceiling.source})"]
    if in_tf32:
        evidence.append(f"{100 * in_tf32 / total:.0f}% of the op time is fp32 convolutions "
                        "or matmuls run in TF32 on the tensor cores (torch's settings allow "
                        "it), measured against the TF32 peak")
    what = "fp32 compute, most of it run in TF32" if mostly_tf32 else "fp32 compute"
    than = " than TF32" if mostly_tf32 else ""
    return [Finding(
        "roofline.lower-precision",
        f"{100 * share:.0f}% of the op time is {what}; {best} runs {better[best]:.1f}x "
        f"faster{than} here", Layer.HARDWARE.value, "info", evidence,
        f"run the compute-bound ops in {best} (torch.autocast), checking the accuracy",
        SOURCE)]


def _elementwise(row: Row) -> bool:
    return row.attrs.get("op_kind") == "elementwise"


def _far_below(far: list[Placement], total: float) -> list[Finding]:
    """Heavy ops far below their roof, as one finding: one op with its figures, several
    (one op in many shapes, or many ops) under one title, the heaviest first."""
    if not far:
        return []
    top = far[0]
    if len(far) == 1:
        return [Finding(
            "roofline.far-below-roof",
            f"{_op_name(top.row)} ran at {percent(top.share)} of what this machine can reach "
            f"for it ({top.bound}-bound)", Layer.FRAMEWORK.value, "info",
            _evidence(top, total), _why(top), SOURCE)]
    names = {_op_name(p.row) for p in far}
    what = (f"{_op_name(top.row)} in {len(far)} shapes" if len(names) == 1
            else f"{len(far)} heavy ops")
    return [Finding(
        "roofline.far-below-roof",
        f"{what} ran far below what this machine can reach (the heaviest at "
        f"{percent(top.share)} of its roof, {top.bound}-bound)", Layer.FRAMEWORK.value,
        "info",
        [f"{p.row.name[:60]}: {percent(p.share)} of its {p.bound} roof, "
         f"{fmt_seconds(p.seconds)} ({100 * p.seconds / total:.0f}% of the costed op time)"
         for p in far], f"the heaviest: {_why(top)}", SOURCE)]


def _evidence(p: Placement, total: float) -> list[str]:
    lines = [f"{fmt_seconds(p.seconds)}, {100 * p.seconds / total:.0f}% of the costed op time"
             + (f", {p.calls:,} calls" if p.calls else "")]
    if p.flop_s is not None and p.flops:
        lines.append(f"achieved {_rate(p.flop_s)}" + (f" of {_rate(p.peak)} {p.peak_name} peak"
                                                       if p.peak else ""))
    if p.byte_s is not None:
        lines.append(f"moved {fmt_si(p.byte_s, 'B/s')}" + (
            f" of {fmt_si(p.bandwidth, 'B/s')}" if p.bandwidth else ""))
    dims = p.row.attrs.get("input_dims")
    if dims:
        lines.append(f"input shapes {dims}")
    return lines


def _why(p: Placement) -> str:
    if p.bound == "latency":
        return ("its calls are too small for the machine: batch them (larger tensors per "
                "call) or fuse them (torch.compile)")
    if p.bound == "compute":
        dims = p.row.attrs.get("input_dims")
        small = p.row.attrs.get("op_kind") in ("matmul", "convolution") and isinstance(
            dims, list) and any(isinstance(d, list) and d and min(d) < SMALL for d in dims)
        return ("its matrices are small for the machine: batch more work per call or fuse"
                if small else "check the kernel it runs (threads, the library torch picked, "
                "the memory layout)")
    return "it moves more bytes than it computes: fuse it with its neighbours (torch.compile)"


def _rate(flop_s: float | None) -> str:
    return "unknown" if flop_s is None else fmt_si(flop_s, "flop/s")
