"""perfstack's GPU paths as a second H200 session ran them, after the fixes the first one
prompted (tests/fixtures/gpu-runs/recheck, `record.sh cuda recheck`; its README says what
each folder holds). Each test reads what that session recorded: no GPU is needed here."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pytest

from perfstack.analysis import roofline
from perfstack.analysis.panes.compile import compile_view
from perfstack.analysis.rules import roofline as roofrules
from perfstack.report import Layer, Report
from perfstack.report.files import load_report

RECHECK = Path(__file__).parent / "fixtures" / "gpu-runs" / "recheck"


def _report(name: str) -> Report:
    return load_report(RECHECK / name / "report.json.gz")


def _metric(report: Report, name: str) -> float:
    m = report.metric(name)
    assert m is not None and m.value is not None, name
    return float(m.value)


def test_the_probe_measured_tf32_and_reached_the_half_precision_peaks_at_8192() -> None:
    """The first session's probe stopped at 4096 (bf16 671 TFLOP/s) and had no TF32 peak;
    this one measured TF32 and went to 8192, where bf16 nears the card's dense figure."""
    gpu = roofline.ceilings_of(_report("resnet"))["gpu"]
    peaks = {k: v / 1e12 for k, v in gpu.peak_flops.items()}
    assert 40 < peaks["fp32"] < 67 and 300 < peaks["tf32"] < 495
    assert peaks["bf16"] > 700 and peaks["fp16"] > 700
    sizes = gpu.how["matmul"]["bf16"]["sizes"]
    assert max(sizes, key=lambda s: sizes[s]) == "8192"


def test_fp32_convolutions_sit_under_the_tf32_roof_and_bf16_is_priced_against_it() -> None:
    """cuDNN ran resnet50's fp32 convolutions in TF32: each is under its roof (no 'ceiling
    too low'), and moving them to bf16 is worth bf16 over TF32 (2x), not over fp32 (15x)."""
    report = _report("resnet")
    gpu = roofline.ceilings_of(report)["gpu"]
    tf32 = roofline.tf32_allowed(report.environment)
    placed = [roofline.place(r, Layer.FRAMEWORK, {"gpu": gpu}, tf32)
              for r in report.layers[Layer.FRAMEWORK] if r.name.startswith("aten::conv2d")]
    convs = [p for p in placed if p is not None and p.share is not None]
    assert convs and {p.peak_name for p in convs} == {"tf32"}
    assert max(p.share for p in convs) < 1.0
    found = {f.rule: f for f in roofrules.annotate(report)[1]}
    assert "roofline.ceiling-low" not in found
    lower = found["roofline.lower-precision"]
    assert "faster than TF32" in lower.title and "2.0x" in lower.title
    assert lower.evidence[0].startswith("peak tf32")


def test_the_raw_cuda_snapshot_is_kept_and_reads_as_the_report_summarised_it() -> None:
    """The allocator's snapshot is kept as torch writes it (memory_viz opens it); read
    again, it gives the summary the run wrote; the reserve at the end (3.9 GB) is below the
    allocator's peak (7.8 GB, cuDNN's workspace the most of it), so it is not called
    fragmentation."""
    with gzip.open(RECHECK / "memory" / "torch" / "cuda-memory.pickle.gz") as fh:
        snapshot = pickle.load(fh)  # our own recording
    assert {"segments", "device_traces"} <= set(snapshot)
    from perfstack_plugins.torchprof.cudasnap import summarize

    written = json.loads((RECHECK / "memory" / "torch" / "torch-memory.json").read_text())
    assert summarize(snapshot) == written["cuda"]
    cuda = written["cuda"]["cuda:0"]
    assert cuda["peak_allocated"] > cuda["reserved"] > cuda["allocated"]
    biggest = cuda["at_peak"][0]
    assert biggest["where"].startswith("(no Python frame")  # cuDNN's workspace
    rules = {f.rule for f in _report("memory").findings}
    assert "memory.fragmentation" not in rules and "memory.activation" in rules


def test_a_cold_first_compile_is_told_from_the_warm_runs_on_triton() -> None:
    """The warm-up run compiled with inductor's caches empty (a fresh machine): 8.2 s, where
    the measured runs found every graph cached (1.5 s). Triton kernels ran 17% of the device
    time; the break was crossed in the profiled steps."""
    report = _report("compiled")
    cold, warm = _metric(report, "compile_time_cold"), _metric(report, "compile_time")
    assert cold > 3 * warm > 0
    assert 0 < _metric(report, "generated_kernels_share") < 100
    assert 0 < _metric(report, "compiled_share") <= 100
    assert _metric(report, "compile_graph_breaks") == 1
    assert _metric(report, "compile_recompiles") == 2
    view = compile_view(report)
    assert view is not None and view.breaks and view.breaks[0].crossed
    kernels = [r.name for r in report.layers[Layer.KERNEL]]
    assert any(name.startswith("triton_") for name in kernels)


@pytest.mark.parametrize("name", ["resnet", "memory", "compiled"])
def test_each_recorded_report_renders_in_every_format(name: str) -> None:
    from perfstack import errors
    from perfstack.plugin.load import load_plugins
    from perfstack.plugin.renderer import RenderOptions

    report = _report(name)
    for fmt, renderer in load_plugins().renderers().items():
        if fmt == "perfetto":  # its raw traces are kept compressed here, under other names:
            with pytest.raises(errors.InputNotFound, match=r"artifact\(s\) could be read"):
                renderer.render(report, RenderOptions())  # no event to export, said
            continue
        assert renderer.render(report, RenderOptions()), fmt
