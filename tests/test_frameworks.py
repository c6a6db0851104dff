"""perfstack on the training code people run: GPT-2 from transformers and a Lightning fit.

Recorded reports of real runs (tests/fixtures/reports/README.md, "frameworks/") carry the
verdicts; one live Lightning run checks what must always hold: the steps table holds the ops
that a closure-based optimizer runs inside its step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from perfstack.analysis.view import build
from perfstack.plugin.load import load_plugins
from perfstack.report import Report
from perfstack.report.files import load_report
from tests.conftest import ROOT

RECORDED = ROOT / "tests" / "fixtures" / "reports" / "frameworks"
WORKLOADS = ROOT / "workloads"


def _metric(report: Report, name: str) -> float:
    found = report.metric(name)
    assert found is not None and found.value is not None, name
    return float(found.value)


def _steps_hold_the_ops(report: Report) -> None:
    """The steps table's torch ops hold the op table's time: Lightning runs forward and
    backward inside optimizer.step(closure), whose range crosses the step range's end (the
    steps table once said 'torch ops 0.0%')."""
    ops = report.metric("cpu_step.ops")
    step = report.metric("torch_step_time")
    assert ops is not None and ops.samples and step is not None and step.samples
    assert sum(ops.samples) >= 0.5 * sum(step.samples)
    # (the op table also counts the optimizer's range past the last step's end: its own
    # time runs on into the run's end under --steps)
    assert sum(ops.samples) >= 0.5 * _metric(report, "torch_ops_self_time")


def test_a_lightning_fit_s_steps_hold_its_ops_and_it_is_not_told_to_load_data() -> None:
    report = load_report(RECORDED / "lightning_steps.json.gz")
    _steps_hold_the_ops(report)
    # Its batches are slices of a tensor: the main thread's running time is not in the
    # DataLoader (py-spy's rows once gave 26%, scaled to '99% outside start-up').
    assert _metric(report, "data_loading_share") < 10
    found = {f.rule for f in load_plugins().findings(report)}
    assert "python.data-loading" not in found


def test_a_lightning_validation_is_named_in_the_step_it_ran_in() -> None:
    """Issue 72: a fit with gradient accumulation and a validation loop read the validation
    as "data loading (DataLoader) +307 ms" (or "torch ops"): the step it ran in says
    evaluation, and the other steps have none."""
    from perfstack.analysis.panes.steps import step_view
    from perfstack.render.words.steps import outlier_line

    report = load_report(RECORDED / "lightning_validation.json.gz")
    evaluation = report.metric("cpu_step.eval")
    assert evaluation is not None and evaluation.samples is not None
    assert [s > 0 for s in evaluation.samples] == [False, True, False, False]
    step = report.metric("torch_step_time")
    assert step is not None and step.samples is not None
    slow = evaluation.samples.index(max(evaluation.samples))
    assert evaluation.samples[slow] > 0.7 * step.samples[slow]  # the validation, not the ops
    view = step_view(report)
    assert view is not None
    lines = [outlier_line(o) for o in view.outliers]
    assert lines and "evaluation (validation) +" in lines[0], lines


def test_an_evaluation_between_steps_is_its_own_phase_and_eval_mode_training_is_not(
        tmp_path: Path) -> None:
    """A plain loop (tests/workloads/evaluates.py) evaluates once after its fourth step and
    trains its seventh and eighth steps with the model in eval mode (frozen batch norm): only
    the evaluation is a phase of its own; the frozen steps' ops are ops."""
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "perfstack", "run", "-q", "--plugins", "torch", "--repeat",
         "0", "--warmup", "0", "--steps", "8", "-o", str(out),
         str(ROOT / "tests" / "workloads" / "evaluates.py")],
        capture_output=True, text=True, timeout=180, cwd=tmp_path,
        env={**__import__("os").environ, "PERFSTACK_HISTORY": "off"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = load_report(out)
    evaluation, ops = report.metric("cpu_step.eval"), report.metric("cpu_step.ops")
    assert evaluation is not None and evaluation.samples is not None
    assert ops is not None and ops.samples is not None
    assert sum(1 for s in evaluation.samples if s > 0) == 1  # the one evaluation
    evaluated = evaluation.samples.index(max(evaluation.samples))
    # 40 forward passes of 512 rows against one training step of 128 (about 50x the work):
    # the step it ran in is mostly evaluation. Compared within that one step, since the
    # first step's ops (no warm-up) can be slower than any evaluation on a loaded machine.
    assert evaluation.samples[evaluated] > ops.samples[evaluated]
    assert all(s > 0 for s in ops.samples)  # every step trained, the frozen ones too


def test_gpt2_under_steps_is_answered_by_its_steps_not_its_imports() -> None:
    """transformers' GPT-2, --steps 3: the imports, the model's build and the two warm-up
    steps ran before py-spy started; they are 'before sampling', and the answer speaks of
    the measured steps (it once said 'Mostly start-up: imports ... 54%')."""
    report = load_report(RECORDED / "gpt2_steps.json.gz")
    assert _metric(report, "budget.before_sampling") > 50
    headline = build(report).headline
    assert headline.bound not in ("startup", "before_sampling", None)
    assert headline.scope == "the measured steps' sampled time"
    assert headline.bound_share is not None and headline.bound_share > 50
    step = report.metric("torch_step_time")
    assert step is not None and step.samples is not None and len(step.samples) == 3


def test_a_live_lightning_fit(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "perfstack", "run", "-q", "--plugins", "torch", "--repeat",
         "0", "--warmup", "0", "--steps", "4", "-o", str(out), "--out-dir",
         str(tmp_path / "run"), str(WORKLOADS / "lightning_fit.py"), "--", "--max-steps",
         "40", "--batch-size", "128", "--hidden", "512"],
        capture_output=True, text=True, timeout=180, cwd=tmp_path,
        env={**__import__("os").environ, "PERFSTACK_HISTORY": "off"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = load_report(out)
    _steps_hold_the_ops(report)
    step = report.metric("torch_step_time")
    assert step is not None and step.samples is not None and len(step.samples) == 4
    # The module view without --torch-stack, each module named by the attribute that holds
    # it (as self.net[0] reaches it), not by class and instance number (Linear_0); net is
    # called from training_step, its owner's forward never runs.
    from perfstack.analysis.panes.modules import module_view
    from perfstack.report import Layer

    paths = {r.key for r in report.layers[Layer.MODULE]}
    assert "net (Sequential)/0 (Linear)" in paths, sorted(paths)[:8]
    view = module_view(report)
    assert view is not None and view.largest is not None
    assert view.largest.dotted.startswith("net.") and view.largest.dotted.endswith("(Linear)")


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
