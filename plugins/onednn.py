"""The ``onednn`` backend: which oneDNN (MKL-DNN) primitives ran, with which implementation.

It runs the workload with ``ONEDNN_VERBOSE=1`` (and the older names ``DNNL_VERBOSE`` and
``MKLDNN_VERBOSE``) and parses the primitive lines the library prints on stdout, in every
format torch has shipped:

    mkldnn_verbose,exec,convolution,jit:avx512_common,forward_training,fsrc:nchw ...  (0.x)
    dnnl_verbose,exec,cpu,convolution,jit:avx2,forward_training,src_f32::blocked...   (1.x-2.x)
    onednn_verbose,exec,cpu,matmul,gemm:jit:f32,undef,src_f32::blocked:abc::f0 ...    (2.x-3.x)
    onednn_verbose,v1,primitive,exec,cpu,convolution,jit:avx512_core,forward_training,... (3.x)

(an optional timestamp field, ONEDNN_VERBOSE_TIMESTAMP=1, is skipped). Kernel rows are the
primitives by kind, implementation, propagation and problem; two finding rules flag reference
(``ref``) implementations and implementations whose ISA is below what the CPU offers.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from perfstack import hookimpl
from perfstack.plugin.backend import Availability, Backend, Collected, Launch, Outcome, RunContext
from perfstack.records import datarecord
from perfstack.report import Better, Finding, Layer, Metric, Quantity, Report, Row

MARKERS = ("onednn_verbose", "dnnl_verbose", "mkldnn_verbose")
COMPONENTS = ("primitive", "graph", "common", "ukernel")
#: oneDNN's ISA names, ranked; later generations rename the same hardware (avx10_1_512).
ISA_RANK = {
    "sse41": 1, "avx": 2, "avx2": 3, "avx2_vnni": 4, "avx2_vnni_2": 4, "avx512_mic": 5,
    "avx512_common": 5, "avx512_core": 6, "avx512_core_vnni": 7, "avx512_core_bf16": 8,
    "avx512_core_fp16": 9, "avx10_1_512": 9, "avx512_core_amx": 10, "avx512_core_amx_bf16": 10,
    "avx10_1_512_amx": 10, "avx512_core_amx_fp16": 11, "avx10_1_512_amx_fp16": 11,
}
_ISA_TOKEN = re.compile(r"(?:^|[:_])(" + "|".join(sorted(ISA_RANK, key=len, reverse=True)) + r")$")
_DTYPE = re.compile(r"(?:^|\s)(?:src|wei|dst|data|diff_src|diff_dst|diff_wei|bia)[_:]"
                    r"(f32|bf16|f16|s8|u8|s32|f64|f8_e5m2|f8_e4m3)")
SOURCE = "onednn"


@datarecord(frozen=True)
class Primitive:
    """One primitive line: what ran, with which implementation, how long."""

    op: str  # "exec" or "create" (JIT compilation, first use)
    kind: str
    impl: str
    prop: str
    dtypes: tuple[str, ...]
    problem: str
    time_ms: float

    @property
    def isa(self) -> str | None:
        """Return the ISA named by the implementation (``avx512_core``), if it names one."""
        for part in reversed(self.impl.split(":")):
            match = _ISA_TOKEN.search(part)
            if match:
                return match.group(1)
        return None


def parse_line(line: str) -> Primitive | str | None:
    """Return a Primitive for an exec/create line, the text of an info line, or None."""
    fields = line.rstrip("\r\n").split(",")
    if fields[0] not in MARKERS or len(fields) < 3:
        return None
    rest = fields[1:]
    while rest and (rest[0] in ("v0", "v1") or _number(rest[0])):
        rest = rest[1:]  # format version and timestamp fields
    if rest and rest[0] in COMPONENTS:
        if rest[0] != "primitive":
            return None  # graph partitions and the like: not primitive executions
        rest = rest[1:]
    if not rest:
        return None
    op = rest[0].split(":")[0]
    if op == "info":
        return ",".join(rest[1:])
    if op not in ("exec", "create"):
        return None
    body = rest[1:]
    if body and body[0] in ("cpu", "gpu"):
        body = body[1:]
    if len(body) < 6 or not _number(body[-1]):
        return None
    descs = " ".join(body[3:-3])
    return Primitive(op, body[0], body[1], body[2], tuple(sorted(set(_DTYPE.findall(descs)))),
                     body[-2], float(body[-1]))


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse(lines: Iterable[str]) -> tuple[list[Primitive], list[str]]:
    """Return the primitives and the info lines in a verbose log."""
    primitives: list[Primitive] = []
    info: list[str] = []
    for line in lines:
        if "verbose," not in line:
            continue
        parsed = parse_line(line)
        if isinstance(parsed, Primitive):
            primitives.append(parsed)
        elif isinstance(parsed, str):
            info.append(parsed)
    return primitives, info


def rows(primitives: list[Primitive]) -> list[Row]:
    """Return kernel rows: executions grouped by kind, implementation, propagation, problem."""
    groups: dict[tuple[str, str, str, str], list[Primitive]] = {}
    for p in primitives:
        if p.op == "exec":
            groups.setdefault((p.kind, p.impl, p.prop, p.problem), []).append(p)
    out = []
    for (kind, impl, prop, problem), group in groups.items():
        total = sum(p.time_ms for p in group) / 1e3
        first = group[0]
        out.append(Row(
            key=f"{kind} {impl} {prop} {problem}", name=f"{kind} {impl} {prop} {problem}",
            source=SOURCE,
            values={"calls": Quantity(len(group), "count"), "total": Quantity(total, "s"),
                    "mean": Quantity(total / len(group), "s")},
            attrs={"kind": kind, "implementation": impl, "isa": first.isa, "prop": prop,
                   "dtypes": list(first.dtypes), "problem": problem,
                   "reference": impl.startswith("ref")}))
    out.sort(key=lambda r: -(r.values["total"].value or 0))
    return out


def _lines(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        yield from fh


class OneDnnBackend(Backend):
    """oneDNN's own account of every primitive it ran (kernel layer)."""

    name = "onednn"
    per_rank = False  # sees the whole torchrun job at once
    layers = (Layer.KERNEL,)
    needs_import = "torch"  # oneDNN runs inside torch
    description = "oneDNN primitives (MKLDNN_VERBOSE): implementation, ISA, shapes, time"

    def check(self) -> Availability:
        """Available when torch is installed (oneDNN is part of its CPU builds)."""
        if importlib.util.find_spec("torch") is None:
            return Availability.no("torch is not installed", "pip install torch")
        return Availability.yes()

    def launch(self, ctx: RunContext) -> Launch:
        """Turn on oneDNN's verbose mode under all the names its versions read."""
        return Launch(env={"ONEDNN_VERBOSE": "1", "DNNL_VERBOSE": "1", "MKLDNN_VERBOSE": "1"})

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Parse the primitive lines from the workload's stdout."""
        if outcome is None or outcome.record.stdout is None:
            return Collected(notes=["no output to read"])
        log = outcome.artifact_dir / "stdout.log"
        primitives, info = parse(_lines(log))
        if not primitives:
            return Collected(empty="no oneDNN primitive ran: this torch build or this "
                                   "workload does not use oneDNN", artifacts={"log": log})
        execs = [p for p in primitives if p.op == "exec"]
        creates = [p for p in primitives if p.op == "create"]
        ref_time = sum(p.time_ms for p in execs if p.impl.startswith("ref")) / 1e3
        metrics = [
            Metric("onednn_exec_time", sum(p.time_ms for p in execs) / 1e3, "s", "kernel",
                   SOURCE, Better.LOWER),
            Metric("onednn_reference_time", ref_time, "s", "kernel", SOURCE, Better.LOWER),
        ]
        notes = [line.split(" (commit")[0] for line in info
                 if line.startswith(("oneDNN", "DNNL", "cpu,isa", "Detected", "Intel MKL-DNN"))]
        if creates:
            notes.append(f"{len(creates)} primitives created (JIT-compiled) in "
                         f"{sum(p.time_ms for p in creates):.1f} ms")
        return Collected(rows={Layer.KERNEL: rows(primitives)}, metrics=metrics, notes=notes,
                         artifacts={"log": log})


#: A finding when layout conversions take more than this share of oneDNN's time.
REORDER_SHARE = 0.3


def _reorders(kernel: list[Row]) -> list[Finding]:
    total = sum(r.values["total"].value or 0 for r in kernel)
    reorders = [r for r in kernel if r.attrs.get("kind") == "reorder"]
    spent = sum(r.values["total"].value or 0 for r in reorders)
    if not total or spent / total <= REORDER_SHARE:
        return []
    return [Finding(
        rule="onednn.reorders",
        title=f"{spent / total:.0%} of oneDNN's time is spent converting layouts (reorders)",
        layer="kernel", severity="warning",
        evidence=[f"{spent * 1e3:.1f} ms of {total * 1e3:.1f} ms in reorders"] + [
            f"reorder {r.attrs['problem']}: {r.values['calls'].value} calls, "
            f"{(r.values['total'].value or 0) * 1e3:.1f} ms" for r in reorders[:3]],
        action=("tensors go back and forth between torch's layout and oneDNN's blocked one: "
                "use channels_last (model.to(memory_format=torch.channels_last)) or a "
                "framework that keeps weights prepacked (IPEX, torch.compile)"),
        source=SOURCE)]


#: The report's ISA words (environment.cpu.isa) -> the best oneDNN rank they allow, per dtype.
def _expected_rank(cpu_isa: set[str], dtypes: set[str]) -> int:
    if dtypes & {"bf16"}:
        return 10 if "AMX-BF16" in cpu_isa else 8 if "AVX-512 BF16" in cpu_isa else 6
    if dtypes & {"s8", "u8"}:
        return 10 if "AMX-INT8" in cpu_isa else 7 if "AVX-512 VNNI" in cpu_isa else 6
    if "AVX-512F" in cpu_isa:
        return 5  # f32 runs on any AVX-512 generation; avx512_common counts too
    return 3 if "AVX2" in cpu_isa else 2 if "AVX" in cpu_isa else 1


@hookimpl
def perfstack_findings(report: Report) -> list[Finding]:
    """Flag reference implementations, and implementations below the CPU's ISA."""
    kernel = [r for r in report.layers[Layer.KERNEL] if r.source == SOURCE]
    found = []
    ref = [r for r in kernel if r.attrs.get("reference")]
    if ref:
        spent = sum(r.values["total"].value or 0 for r in ref)
        found.append(Finding(
            rule="onednn.reference-kernel",
            title=f"oneDNN ran reference (unoptimized) kernels for {spent * 1e3:.1f} ms",
            layer="kernel", severity="warning",
            evidence=[f"{r.attrs['kind']} {r.attrs['implementation']} {r.attrs['problem']}: "
                      f"{r.values['calls'].value} calls, {(r.values['total'].value or 0) * 1e3:.2f}"
                      " ms" for r in ref[:5]],
            action=("no optimized kernel fits this shape, layout or dtype here: try "
                    "channels_last, a dtype the CPU supports natively, or another shape"),
            source=SOURCE))
    found += _reorders(kernel)
    cpu_isa = set(report.environment.get("cpu", {}).get("isa") or [])
    if not cpu_isa:
        return found
    low = [r for r in kernel if r.attrs.get("isa") in ISA_RANK and ISA_RANK[r.attrs["isa"]]
           < _expected_rank(cpu_isa, set(r.attrs["dtypes"]))]
    if not low:
        return found
    best_used = max(ISA_RANK[r.attrs["isa"]] for r in kernel if r.attrs.get("isa") in ISA_RANK)
    evidence = [f"{r.attrs['kind']} {r.attrs['implementation']} {r.attrs['prop']} "
                f"({', '.join(r.attrs['dtypes']) or 'f32'}) {r.attrs['problem']}" for r in low[:5]]
    if best_used < _expected_rank(cpu_isa, {"f32"}):
        # No kernel reached what the CPU offers: oneDNN itself is capped, not one shape.
        limit = report.environment.get("threads", {}).get("ONEDNN_MAX_CPU_ISA")
        found.append(Finding(
            rule="onednn.low-isa",
            title=f"oneDNN runs below this CPU's ISA: {len(low)} kernels, none at its best",
            layer="kernel", severity="warning",
            evidence=[f"CPU: {', '.join(sorted(cpu_isa))}", *evidence],
            action=(f"ONEDNN_MAX_CPU_ISA={limit} caps it: unset it" if limit else
                    "check ONEDNN_MAX_CPU_ISA/DNNL_MAX_CPU_ISA and the torch build "
                    "(torch.backends.cpu.get_cpu_capability())"),
            source=SOURCE))
    else:
        found.append(Finding(
            rule="onednn.shape-isa-fallback",
            title=f"{len(low)} oneDNN kernels chose a lower ISA for their shapes",
            layer="kernel", severity="info",
            evidence=evidence,
            action=("oneDNN picks the ISA per shape: channel counts that do not fill a vector "
                    "(16 floats for AVX-512) fall back to narrower code; pad channels to "
                    "multiples of 16 if these kernels matter"),
            source=SOURCE))
    return found


@hookimpl
def perfstack_backends() -> list[Backend]:
    """Provide the onednn backend."""
    return [OneDnnBackend()]
