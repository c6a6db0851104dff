"""Each op priced at the type its work ran in, autocast included: a real trace of a bf16
autocast loop (tests/fixtures/torch-traces/autocast_mlp.pt.trace.json.gz) against a count of
its raw events, and an op above its type's roof said as perfstack's own error."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

from perfstack_plugins.torchprof.rows import summarize
from perfstack_plugins.torchprof.trace import TraceAggregate

from perfstack.analysis.roofline import place
from perfstack.analysis.rules.roofline import annotate
from perfstack.machine.roofline.ceilingrecord import Ceilings
from perfstack.report import Layer, Quantity, Report, Row, RunInfo

TRACE = Path(__file__).parent / "fixtures/torch-traces/autocast_mlp.pt.trace.json.gz"


def _raw_calls() -> Counter[tuple[str, str, str]]:
    """Each (op, shapes, types) call of the raw trace inside its profiled steps."""
    with gzip.open(TRACE, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if str(e.get("name", "")).startswith("ProfilerStep#")]
    out: Counter[tuple[str, str, str]] = Counter()
    for e in events:
        if e.get("cat") != "cpu_op" or not any(a <= e["ts"] <= b for a, b in steps):
            continue
        args = e.get("args", {})
        out[(e["name"], json.dumps(args.get("Input Dims")), json.dumps(args.get("Input type")))] \
            += 1
    return out


def _rows() -> list[Row]:
    agg = TraceAggregate()
    agg.add_file(TRACE)
    rows, _, _ = summarize(agg)
    return rows[Layer.FRAMEWORK]


def test_autocast_ops_are_counted_once_in_the_type_they_ran_in() -> None:
    raw = _raw_calls()
    # the trace holds each direct autocast product twice: the fp32 call and the bf16 call
    # inside it (nn.Linear's come as aten::linear twice, and one bf16 aten::addmm)
    outer = sum(n for (name, _, types), n in raw.items()
                if name == "aten::addmm" and "float" in types and "BFloat16" not in types)
    inner = sum(n for (name, _, types), n in raw.items()
                if name == "aten::addmm" and "BFloat16" in types)
    assert 0 < outer < inner
    addmm = [r for r in _rows() if r.attrs.get("op") == "aten::addmm"]
    assert addmm and all(r.attrs.get("dtype") == "bf16" for r in addmm)
    assert sum(int(r.values["calls"].value or 0) for r in addmm) == inner
    for r in addmm:  # torch's count, once a call: 2 x M x N x K
        _, (m, k), (_, n), *_ = r.attrs["input_dims"]
        assert r.values["flops"].value == 2 * m * n * k * r.values["calls"].value
    linear = [r for r in _rows() if r.attrs.get("op") == "aten::linear"]
    assert linear and all(r.attrs.get("dtype") in (None, "bf16") for r in linear)


def _gpu_row(name: str, dtype: str, flops: float, seconds: float) -> Row:
    return Row(name, name, "torch", {"flops": Quantity(flops, "flop"),
                                     "bytes": Quantity(flops / 1000, "B"),
                                     "device": Quantity(seconds, "s"),
                                     "calls": Quantity(10, "count")},
               {"dtype": dtype, "op": name.split(" ")[0]})


H200 = Ceilings(device="gpu", peak_flops={"fp32": 49.7e12, "tf32": 394e12, "bf16": 772e12},
                bandwidth=4.0e12, source="measured", name="NVIDIA H200")


def test_an_op_is_held_to_its_own_types_roof() -> None:
    """A bf16 product at 700 TFLOP/s is 91% of the bf16 roof; were it priced as fp32/TF32 it
    would sit at 178% of the TF32 one."""
    bf16 = place(_gpu_row("aten::mm [[8192, 8192], [8192, 8192]]", "bf16", 7e12, 0.01),
                 Layer.FRAMEWORK, {"gpu": H200})
    assert bf16 is not None and bf16.peak_name == "bf16"
    assert bf16.share is not None and 0.9 < bf16.share < 0.92


def test_an_op_above_its_roof_is_perfstacks_error_said_with_op_type_and_ceiling() -> None:
    row = _gpu_row("aten::mm [[8192, 8192], [8192, 8192]]", "fp32", 7e12, 0.01)
    run = RunInfo(command=["x.py"], cwd="/", started="2026-11-28T00:00:00", duration_s=1.0,
                  perfstack_version="0", repeat=1, warmup=0, timeout_s=None, complete=True,
                  runs=[])
    report = Report(run=run, environment={"ceilings": {"gpu": H200.as_dict()}}, backends=[])
    report.layers[Layer.FRAMEWORK].append(row)
    _, findings = annotate(report)
    found = [f for f in findings if f.rule == "roofline.ceiling-low"]
    assert len(found) == 1
    f = found[0]
    assert "perfstack" in f.title and "tf32" in f.title and "above its roof" in f.title
    assert any(e.startswith("aten::mm: ") and "fp32 inputs" in e and "tf32 roof" in e
               for e in f.evidence), f.evidence


def test_a_memory_bound_op_above_the_bandwidth_roof_is_said_as_the_ceilings_error() -> None:
    """A fill that only writes moved 4.5 TB/s against the probe's copy (4.19 TB/s, each byte
    read and written): 107% of the memory roof, said as perfstack's ceiling, with the op and
    the bandwidth; the device verdict's evidence calls it the memory roof, not the bf16 one."""
    row = Row("aten::fill_ [[1073741824], []]", "aten::fill_ [[1073741824], []]", "torch",
              {"flops": Quantity(0, "flop"), "bytes": Quantity(4.5e12 * 0.01, "B"),
               "device": Quantity(0.01, "s"), "calls": Quantity(10, "count")},
              {"dtype": "fp32", "op": "aten::fill_", "op_kind": "memory"})
    run = RunInfo(command=["x.py"], cwd="/", started="2026-11-29T00:00:00", duration_s=1.0,
                  perfstack_version="0", repeat=1, warmup=0, timeout_s=None, complete=True,
                  runs=[])
    copy = Ceilings(device="gpu", peak_flops={"fp32": 49.7e12}, bandwidth=4.19e12,
                    source="measured", name="NVIDIA H200")
    report = Report(run=run, environment={"ceilings": {"gpu": copy.as_dict()}}, backends=[])
    report.layers[Layer.FRAMEWORK].append(row)
    _, findings = annotate(report)
    (found,) = [f for f in findings if f.rule == "roofline.bandwidth-low"]
    assert found.title.startswith("1 memory-bound op above the memory roof (up to 107%")
    assert found.evidence == ["aten::fill_: 107% of the memory roof (4.19 TB/s), fp32"]
    assert not [f for f in findings if f.rule == "roofline.ceiling-low"]
