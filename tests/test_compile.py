"""The compile layer: torch.compile's own records of a run (frames, compiles by phase,
recompiles with the failed guard, graph breaks at the user's line), read from runs recorded
on a GPU (tests/fixtures/gpu-runs/compiled) and from a live run here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from perfstack_plugins.compiler.records import in_steps, read, torch_total

from perfstack.report import Layer
from tests.conftest import ROOT

GPU_RUNS = ROOT / "tests" / "fixtures" / "gpu-runs" / "compiled"
WORKLOAD = ROOT / "workloads" / "compiled.py"
#: the workload's line that breaks the graph, found in its source
BREAK_LINE = next(i for i, text in enumerate(WORKLOAD.read_text("utf-8").splitlines(), 1)
                  if "# GRAPH BREAK" in text)
#: that line when the GPU runs were recorded
RECORDED_BREAK_LINE = 51


def _recorded(run: str) -> dict:
    return json.loads((GPU_RUNS / run / "compile.json").read_text("utf-8"))


@pytest.mark.parametrize("run", ["baseline-1", "baseline-2", "torch"])
def test_frames_breaks_and_recompiles_are_what_the_source_says(run: str) -> None:
    found = read(_recorded(run))
    frames = {f.name: f for f in found.frames}
    resume = f"torch_dynamo_resume_in_forward_at_{RECORDED_BREAK_LINE}"
    assert set(frames) == {"forward", resume}
    for frame in frames.values():
        # the first batch (16) compiles static; the second (24) fails the guard on dim 0
        assert len(frame.compiles) == 2
        [again] = frame.recompiles
        assert "size mismatch at index 0. expected 16, actual 24" in again.recompile_reason
    assert frames[resume].resumes == "forward"
    [gb] = found.breaks
    assert (Path(gb.file).name, gb.line, gb.function) == (
        "compiled.py", RECORDED_BREAK_LINE, "forward")
    assert gb.reason.startswith("Unsupported Tensor.item() call")
    assert any("capture_scalar_outputs" in hint for hint in gb.hints)
    assert found.recompiles == 2 and found.unique_graphs == 4 and not found.truncated


@pytest.mark.parametrize("run", ["baseline-1", "baseline-2", "pyspy", "nvml"])
def test_compile_time_agrees_with_torch_s_own_compile_times(run: str) -> None:
    data = _recorded(run)
    ours, theirs = read(data).seconds, torch_total(data)
    assert theirs is not None
    assert abs(ours - theirs) <= 0.10 * theirs, (ours, theirs)


def test_a_cold_compile_is_split_by_phase_and_its_backward_counted() -> None:
    found = read(_recorded("baseline-1"))  # the first run: inductor's caches were empty
    forward = next(f for f in found.frames if f.name == "forward")
    first = forward.compiles[0]
    assert first.backward_s is not None and first.backward_s > 0
    assert first.inductor_s is not None and first.kernels_build_s is not None
    assert first.dynamo_s is not None and first.backend_s is not None
    assert first.dynamo_s + first.backend_s + first.backward_s == pytest.approx(first.seconds)
    warm = read(_recorded("baseline-2"))  # caches hit: no backward compile recorded
    assert warm.seconds < found.seconds / 2


def test_each_compile_is_placed_in_the_step_it_began_in() -> None:
    steps = json.loads((GPU_RUNS / "baseline-1" / "workload-steps.json").read_text("utf-8"))
    found = read(_recorded("baseline-1"))
    per_step = in_steps(found, steps["first_mark_epoch_s"], steps["step_times_s"])
    # the first mark ends the first step (batch 16: the first compiles, before any mark);
    # the recompiles for batch 24 fall in the next step, the first one measured
    assert per_step[0] == pytest.approx(sum(c.seconds for c in found.compiles
                                            if c.recompile_reason), rel=1e-6)
    assert not any(per_step[1:])


def test_a_live_run_names_the_break_and_the_recompile(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "perfstack", "run", "-q", "--plugins", "dynamo", "--repeat",
         "1", "--warmup", "0", "-o", str(out), "--out-dir", str(tmp_path / "run"),
         str(WORKLOAD), "--", "--steps", "4", "--batch-sizes", "4,6", "--width", "8",
         "--hidden", "8", "--backend", "eager"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**__import__("os").environ, "PERFSTACK_HISTORY": "off"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    from perfstack import load

    report = load(out)
    rows = report.layers[Layer.COMPILE]
    breaks = [r for r in rows if r.attrs.get("kind") == "graph-break"]
    assert [(Path(r.attrs["file"]).name, r.attrs["line"]) for r in breaks] == [
        ("compiled.py", BREAK_LINE)]
    forward = next(r for r in rows if r.name == "forward")
    assert forward.values["compiles"].value == 2
    assert "size mismatch at index 0. expected 4, actual 6" in forward.attrs[
        "recompile_reasons"][0]
    rules = {f.rule for f in report.findings}
    assert {"compile.graph-breaks", "compile.recompiles"} <= rules
    assert report.metric("compile_time").value > 0
