"""The torch backend end to end: real torch.profiler runs on real workloads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WORKLOADS, backend, perfstack_in

pytest.importorskip("torch")
ONCE = ("-q", "--repeat", "0", "--warmup", "0", "--plugins", "torch")


def _rows(report, layer):
    return {row["key"]: row for row in report["layers"][layer]}


def test_training_loop_is_stepped_by_the_optimizer(tiny_report: Path) -> None:
    """tiny_mlp's training loop (the shared run; its Python stacks change no op's calls)."""
    report = json.loads(tiny_report.read_text())
    torch_backend = backend(report, "torch")
    assert torch_backend["status"] == "ok", torch_backend
    step = next(m for m in report["metrics"] if m["name"] == "torch_step_time")
    assert len(step["samples"]) == 3  # the default schedule's active steps
    framework = _rows(report, "framework")
    addmm = [r for k, r in framework.items() if k.startswith("aten::addmm ")]
    assert len(addmm) == 3  # one row per input shape: the MLP's three Linear layers
    assert sum(r["values"]["calls"]["value"] for r in addmm) == 3 * 3  # 3 layers, 3 steps
    assert all(r["values"]["flops"]["value"] > 0 and r["attrs"]["input_dims"] for r in addmm)
    assert "aten::addmm" in _rows(report, "kernel")
    trace = tiny_report.parent / torch_backend["artifacts"]["trace"]
    assert "traceEvents" in json.loads(trace.read_text())  # opens in Perfetto
    assert "3 profiled steps" in torch_backend["notes"]


def test_inference_loop_steps_with_perfstack_step(perfstack):
    result = perfstack("run", *ONCE, "--torch-active", "2", str(WORKLOADS / "torch_infer.py"))
    assert result.code == 0, result.stderr
    report = result.report()
    step = next(m for m in report["metrics"] if m["name"] == "torch_step_time")
    assert len(step["samples"]) == 2
    linear = [r for k, r in _rows(report, "framework").items() if k.startswith("aten::linear ")]
    assert sum(r["values"]["calls"]["value"] for r in linear) == 2 * 2
    # The profiler's start and its window's steps bring no compiler into a workload that
    # compiles nothing (asked for a setting of inductor's, torch imports inductor and
    # dynamo: a second a process).
    printed = (result.cwd / ".perfstack/runs/latest/torch/stdout.log").read_text()
    assert "imported: dynamo False, inductor False; torch's own lazy attributes: True" \
        in printed, printed  # hidden only during the profiler's calls


@pytest.fixture(scope="module")
def nostep(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of a script with no steps, with Python stacks and memory attribution on (the
    options add columns and links; they change no op's calls), read by the tests below."""
    result = perfstack_in(tmp_path_factory.mktemp("nostep"), "run", *ONCE, "--torch-stack",
                          "--torch-memory", str(WORKLOADS / "torch_nostep.py"))
    assert result.code == 0, result.stderr
    return result.report()


def test_without_steps_the_whole_run_is_profiled(nostep: dict[str, Any]) -> None:
    assert "no steps: the whole run was profiled" in backend(nostep, "torch")["notes"]
    mm = [r for k, r in _rows(nostep, "framework").items() if k.startswith("aten::mm ")]
    assert sum(r["values"]["calls"]["value"] for r in mm) == 3


def test_stacks_link_ops_to_the_python_functions_that_called_them(
        nostep: dict[str, Any]) -> None:
    python = _rows(nostep, "python")
    compute = next(k for k in python if k.startswith("compute (") and "torch_nostep.py:" in k)
    mm = next(r for k, r in _rows(nostep, "framework").items() if k.startswith("aten::mm "))
    assert mm["links"]["python"] == [compute]


def test_memory_option_attributes_allocations_to_ops(nostep: dict[str, Any]) -> None:
    framework = _rows(nostep, "framework")
    # Allocations belong to the innermost op, as torch's self memory does: mm's outputs.
    mm = next(r for k, r in framework.items() if k.startswith("aten::mm "))
    assert mm["values"]["self_alloc"] == {"value": 3 * 128 * 128 * 4, "unit": "B"}


def test_only_rank_zero_is_profiled_under_distributed(perfstack):
    """Rank 1 of a job is not profiled by default, and the report says why. (Rank 1 profiled
    when the ranks option names it, --ranks all setting --torch-ranks all: the shared ddp_job,
    tests/test_distributed.py.)"""
    result = perfstack("run", *ONCE, str(WORKLOADS / "torch_nostep.py"), env={"RANK": "1"})
    assert result.code == 0, result.stderr
    torch_backend = backend(result.report(), "torch")
    # Nothing to report, and why: not "ok"
    assert torch_backend["status"] == "empty", torch_backend
    assert torch_backend["reason"] == "rank 1 is not profiled (--torch-ranks selects the ranks)"


def test_a_crash_before_the_profiler_saves_is_reported(perfstack):
    # --keep-going: profile the crash (by default the backends are not run after it).
    result = perfstack("run", *ONCE, "--keep-going", str(WORKLOADS / "segfault.py"))
    assert result.code == 8
    torch_backend = backend(result.report(), "torch")
    assert torch_backend["status"] == "crashed"
    assert any("never finished" in n or "no trace" in n for n in torch_backend["notes"])
