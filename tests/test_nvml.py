"""The NVML backend: unavailable here with its reason; its arithmetic on a timeline."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from perfstack_plugins.nvmlsampler import NvmlBackend, energy, summarize

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
    rows, metrics, _notes = summarize(header, samples, steps=8)
    by_key = {r.key: r for r in rows}
    power = by_key["gpu0.power_w"].values
    assert power["max"].value == 661.0 and power["p95"].value == 661.0
    assert power["mean"].value == pytest.approx(sum(s["power_w"] for s in samples) / 10)
    instant = by_key["gpu0.power_instant_w"].values["mean"]
    assert instant.value is None and "Not Supported" in instant.reason  # unknown, not zero
    assert "Insufficient Permissions" in by_key["gpu0.proc_mem_b"].values["mean"].reason
    m = {x.name: x for x in metrics}
    assert m["gpu0_energy"].unit == "J"
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
    from perfstack.run.rundir import RunFolder

    result = perfstack("run", "-q", "--repeat", "1", "--warmup", "0", "--plugins", "resources",
                       str(WORKLOADS / "reports_metric.py"))
    assert result.code == 0, result.stderr
    assert RunFolder(tmp_path / ".perfstack/runs/latest/baseline-1").steps() == 5
