"""The NVML backend: unavailable here with its reason; its arithmetic on a timeline."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from perfstack_plugins.nvmlsampler.figures import energy, summarize
from perfstack_plugins.nvmlsampler.sampler import NvmlBackend

from tests.conftest import WORKLOADS, backend

FIXTURE = Path(__file__).parent / "fixtures" / "nvml" / "timeline_constructed.jsonl"


def _load():
    lines = FIXTURE.read_text().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def test_energy_from_the_counter_and_by_integration():
    _header, samples = _load()
    joules, how = energy(samples)
    trapezoid = sum((a["power_w"] + b["power_w"]) / 2 * 0.1 for a, b in itertools.pairwise(samples))
    assert how == "counter" and joules == pytest.approx(trapezoid, rel=1e-6)
    without_counter = [{**s, "energy_j": None} for s in samples]
    joules2, how2 = energy(without_counter)
    assert how2 == "integrated" and joules2 == pytest.approx(trapezoid)
    assert energy(samples[:1]) == (None, "too few samples")


def test_rows_metrics_and_unsupported_fields():
    header, samples = _load()
    # (the constructed timeline's 0.9 s stretched to 1.8 s: steps at least as long as the
    # second NVML averages utilisation and power over)
    samples = [{**s, "t": 2 * s["t"]} for s in samples]
    rows, metrics, _notes = summarize(header, samples, steps=(0.0, 1.8, 8))
    by_key = {r.key: r for r in rows}
    power = by_key["gpu0.power_w"].values
    assert power["max"].value == 661.0 and power["p95"].value == 661.0
    assert power["mean"].value == pytest.approx(sum(s["power_w"] for s in samples) / 10)
    instant = by_key["gpu0.power_instant_w"].values["mean"]
    assert instant.value is None and "Not Supported" in instant.reason  # unknown, not zero
    assert "Insufficient Permissions" in by_key["gpu0.proc_mem_b"].values["mean"].reason
    m = {x.name: x for x in metrics}
    assert m["gpu0_energy"].unit == "J"
    # the steps span the whole timeline here: the counter across it, over the steps
    assert m["gpu0_joules_per_step"].value == pytest.approx(m["gpu0_energy"].value / 8)
    assert m["gpu0_util_gpu_mean"].better.value == "higher"
    _rows2, metrics2, notes2 = summarize(
        header, [{**s, "energy_j": None} for s in samples], steps=None)
    names = {x.name for x in metrics2}
    assert "gpu0_energy_integrated" in names and "gpu0_joules_per_step" not in names
    assert any("integrated from power samples" in n for n in notes2)


def test_unavailable_here_with_the_reason(perfstack):
    available = NvmlBackend().check()
    if available.ok:
        pytest.skip("this machine has an NVIDIA GPU: the live path applies")
    assert "NVML" in (available.reason or "") or "nvidia-ml-py" in (available.reason or "")
    assert available.fix
    result = perfstack("run", "-q", "--repeat", "1", "--warmup", "0", "--plugins",
                       "nvml,resources", str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    report = result.report()
    nvml = backend(report, "nvml")
    assert nvml["status"] == "unavailable" and nvml["reason"] and nvml["fix"]
    assert backend(report, "resources")["status"] == "ok"


def test_the_workload_step_count_reaches_backends(perfstack, tmp_path):
    from perfstack.runfolder.rundir import RunFolder

    result = perfstack("run", "-q", "--repeat", "1", "--warmup", "0", "--plugins", "resources",
                       str(WORKLOADS / "reports_metric.py"))
    assert result.code == 0, result.stderr
    assert RunFolder(tmp_path / ".perfstack/runs/latest/baseline-1").steps() == 5


GPU_RUN = Path(__file__).parent / "fixtures" / "gpu-runs" / "resnet" / "nvml"


@pytest.mark.parametrize("recording", ["resnet", "recheck/resnet"])
def test_energy_per_step_is_unknown_over_steps_too_short_for_the_counter(recording: str):
    """NVML on an H200 (tests/fixtures/gpu-runs, two sessions): resnet50, --steps 5, the
    sampler attached when the measured steps began and ran on through the exit. Its joules
    per step once divided the whole timeline's energy by the steps (34 J for a 20 ms step);
    then the counter across the steps' own span (103 ms), which read 6.2 J a step in the
    first session and 12.1 J in the second: over one sample period the counter's own steps
    are most of the figure. Too short a span is unknown, with the reason and the fix."""
    from perfstack_plugins.nvmlsampler.figures import energy_between
    from perfstack_plugins.nvmlsampler.sampler import _steps_on_timeline, read_timeline

    from perfstack.plugin.backend import RunContext, StepWindow, Workload

    folder = GPU_RUN.parent.parent / recording / "nvml"
    header, samples = read_timeline(folder / "nvml-timeline.jsonl")
    assert header["gpus"][0]["name"] == "NVIDIA H200" and len(samples) >= 12
    ctx = RunContext("nvml", Workload("resnet50.py"), folder, {}, None,
                     steps=StepWindow(2, 5))
    span = _steps_on_timeline(ctx, header)
    assert span is not None and span[2] == 5
    assert 0.09 < span[1] - span[0] < 0.12  # 5 steps of about 20 ms
    read = energy_between(samples, *span[:2])
    assert read is not None and 5 < read < 65  # what the counter says over 103 ms
    rows, metrics, _ = summarize(header, samples, span)
    m = {x.name: x for x in metrics}
    per_step = m["gpu0_joules_per_step"]
    assert per_step.value is None and "too short" in str(per_step.reason)
    assert "--steps" in str(per_step.reason)
    power = {r.key: r for r in rows}["gpu0.power_w"].values
    # 103 ms hold one sample or none (every 0.1 s), and are far under the second the driver
    # averages power over: the steps' power is unknown, with the fix; the whole run's
    # (start-up and teardown included) stays beside, named as such
    assert power["mean"].value is None and "under the 1 s NVML averages this over" in str(
        power["mean"].reason) and "--steps" in str(power["mean"].reason)
    assert 150 < power["run_mean"].value < 200  # NVML's averaged power, W
    assert m["gpu0_util_gpu_mean"].value is None
    assert energy_between(samples, 5.0, 6.0) is None  # past the timeline: unknown
    # the same timeline with the steps over its whole second: the counter over them
    whole = (samples[0]["t"], samples[-1]["t"], 50)
    again = {x.name: x for x in summarize(header, samples, whole)[1]}
    assert again["gpu0_joules_per_step"].value == pytest.approx(
        (samples[-1]["energy_j"] - samples[0]["energy_j"]) / 50)


def test_the_html_draws_the_gpu_over_time_only_where_nvml_ran():
    """The H200 run's report draws power and utilisation over time from its timeline; a run
    on a machine with no GPU says nothing of it (it once said 'no NVML samples')."""
    from perfstack.plugin.load import load_plugins
    from perfstack.plugin.renderer import RenderOptions
    from perfstack.report.files import load_report

    html = load_plugins().renderers()["html"]
    gpu = load_report(GPU_RUN.parent / "report.json.gz")
    page = html.render(gpu, RenderOptions(report_dir=GPU_RUN.parent))
    assert 'id="timeseries"' in page and "timeseries-empty" not in page
    assert "GPU 0 power_w (W)" in page
    cpu = load_report(Path(__file__).parent / "fixtures/reports/rules/threads_gil.json.gz")
    assert 'id="timeseries"' not in html.render(cpu, RenderOptions())


def test_nvml_figures_are_the_measured_steps_not_the_whole_run() -> None:
    """The H200's real timeline (recheck/resnet): the GPU busy 52% in the samples taken while
    the model trained, 0% through the second of teardown after; over the whole run that is a
    mean of 13%. Over a span of steps that holds the busy samples, a level NVML reads at the
    instant (the power drawn) is the steps' own, and the row says what it is over; the
    utilisation, which the driver averages over up to a second, is unknown over these 213 ms
    (its 52% is partly the time before them)."""
    from perfstack_plugins.nvmlsampler.sampler import read_timeline

    header, samples = read_timeline(GPU_RUN.parent.parent / "recheck" / "resnet" / "nvml"
                                    / "nvml-timeline.jsonl")
    busy = [s["t"] for s in samples if s["util_gpu"] > 0]
    assert len(busy) == 3
    rows, metrics, _ = summarize(header, samples, (busy[0], busy[-1], 12))
    by_key = {r.key: r for r in rows}
    instant = by_key["gpu0.power_instant_w"]
    inside = [s["power_instant_w"] for s in samples if busy[0] <= s["t"] <= busy[-1]]
    assert instant.values["mean"].value == pytest.approx(sum(inside) / 3)
    assert instant.values["run_mean"].value == pytest.approx(
        sum(s["power_instant_w"] for s in samples) / len(samples))
    assert instant.attrs["window"].startswith("the 12 measured steps")
    util = by_key["gpu0.util_gpu"]
    assert util.values["mean"].value is None and util.values["run_mean"].value == 13
    assert "213 ms, under the 1 s" in str({m.name: m for m in metrics}[
        "gpu0_util_gpu_mean"].reason)
    rows, _, _ = summarize(header, samples, None)
    whole = {r.key: r for r in rows}["gpu0.util_gpu"]
    assert whole.values["mean"].value == 13
    assert whole.attrs["window"] == "the whole run (the workload marked no step)"


def test_steps_shorter_than_nvmls_own_averaging_leave_its_averages_unknown() -> None:
    """Recorded on an H200 (tests/fixtures/nvml/h200_gemm_timeline.jsonl, record.sh's
    "loops", 2026-11-30): 10 steps of 8 bf16 GEMMs, the device 96% busy by hand, over 127 ms
    sampled every 0.02 s. The driver's utilisation and averaged power still read the idle
    time before (3%, 101 W): unknown, saying why; the instantaneous power is the steps'."""
    lines = (FIXTURE.parent / "h200_gemm_timeline.jsonl").read_text().splitlines()
    header, samples = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    rows, metrics, _ = summarize(header, samples, (0.0, 0.127, 10))
    by_key = {r.key: r.values for r in rows}
    m = {x.name: x for x in metrics}
    for field in ("util_gpu", "power_w", "util_mem"):
        assert by_key[f"gpu0.{field}"]["mean"].value is None
        assert m[f"gpu0_{field}_mean"].value is None
        assert "under the 1 s NVML averages this over" in str(m[f"gpu0_{field}_mean"].reason)
    assert by_key["gpu0.power_instant_w"]["mean"].value > 600  # the GEMMs' draw, 700 W limit
    assert by_key["gpu0.proc_mem_b"]["mean"].value > 0  # a level, not an average: read
