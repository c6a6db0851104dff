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


def _speedscope(name: str) -> tuple[list, list]:
    import gzip

    data = json.loads(gzip.decompress((GPU_RUNS / "pyspy" / name).read_bytes()))
    return data["shared"]["frames"], data["profiles"]


def test_the_time_budget_tells_compiling_from_start_up_and_teardown_from_waiting() -> None:
    """py-spy's run of the compile workload on the GPU: torch.compile's call imported the
    compiler (4.8 s of imports inside it) and compiled (the rest); the process ran on 8.7 s
    after the script returned (its teardown), unsampled but for its last 0.8 s."""
    from perfstack_plugins.pyspy.speedscope import time_budget

    frames, profiles = _speedscope("profile.speedscope.json.gz")
    gil_frames, gil_profiles = _speedscope("gil.speedscope.json.gz")
    steps = json.loads((GPU_RUNS / "pyspy" / "workload-steps.json").read_text("utf-8"))
    started = json.loads((GPU_RUNS / "pyspy" / "workload.json").read_text("utf-8"))
    wall = 21.575  # the run's record (report.json.gz, run "pyspy")
    teardown = started["start_ns"] / 1e9 + wall - (steps["first_mark_epoch_s"]
                                                   + steps["first_step_to_end_s"])
    without, _ = time_budget(frames, profiles, gil_frames, gil_profiles, wall, 0.1)
    shares = {m.name: m.value for m in without}
    assert shares["budget.compile"] > 30  # was filed under start-up and imports
    assert shares["budget.idle"] > 40  # the unsampled teardown, taken for waiting
    told, _ = time_budget(frames, profiles, gil_frames, gil_profiles, wall, 0.1,
                          teardown_s=teardown)
    shares_told = {m.name: m.value for m in told}
    assert shares_told["budget.idle"] < 10
    assert shares_told["budget.startup"] == pytest.approx(
        shares["budget.startup"] + shares["budget.idle"] - shares_told["budget.idle"])
    assert sum(shares_told.values()) == pytest.approx(100, abs=0.5)


def test_under_steps_what_ran_before_sampling_is_its_own_part_and_no_answer() -> None:
    """--steps: py-spy starts after the warm-up steps; the seconds before it (imports, the
    model's build, the warm-up steps) are 'before sampling', not imports, and the headline
    speaks of the sampled part."""
    from perfstack_plugins.pyspy.speedscope import time_budget

    from perfstack.analysis.view import build
    from perfstack.report import Better, Metric, Report, RunInfo

    frames, profiles = _speedscope("profile.speedscope.json.gz")
    gil_frames, gil_profiles = _speedscope("gil.speedscope.json.gz")
    budget, _ = time_budget(frames, profiles, gil_frames, gil_profiles, 60.0, 40.0,
                            windowed=True)
    shares = {m.name: m.value for m in budget}
    assert shares["budget.before_sampling"] == pytest.approx(100 * 40 / 60)
    assert sum(shares.values()) == pytest.approx(100, abs=0.5)
    report = Report(RunInfo(command=["python", "w.py"], cwd="/", started="", duration_s=60.0,
                            perfstack_version="0", repeat=1, warmup=0, timeout_s=None,
                            complete=True), {}, metrics=[
        Metric("wall_time", 60.0, "s", "run", "baseline", Better.LOWER), *budget])
    headline = build(report).headline
    assert headline.bound not in (None, "before_sampling")


def test_the_recompile_limit_is_said_loudly() -> None:
    """A Python number that changes every call (tests/workloads/recompile_limit.py): a
    recompile each time until dynamo's limit (8), then it runs the function eagerly,
    silently; its record of that compile names no frame. The frame is found by its compile
    id, and a critical finding says so. (The records of one run of it, recorded here:
    `perfstack run --plugins dynamo --repeat 1 --warmup 0 tests/workloads/recompile_limit.py`,
    its baseline-1/compile.json.)"""
    import gzip

    from perfstack_plugins.compiler.findings import findings
    from perfstack_plugins.compiler.rows import collected

    from perfstack.report import Report, RunInfo

    recorded = ROOT / "tests/fixtures/reports/compile/recompile_limit.compile.json.gz"
    with gzip.open(recorded, "rt", encoding="utf-8") as fh:
        run = read(json.load(fh))
    layer = collected([run], run, None, None, [], None)
    report = Report(RunInfo(command=["python", str(ROOT / "tests/workloads/recompile_limit.py")],
                            cwd=str(ROOT), started="", duration_s=1.0, perfstack_version="0",
                            repeat=1, warmup=0, timeout_s=None, complete=True),
                    {}, layers=layer.rows, metrics=layer.metrics)
    [frame] = [r for r in report.layers[Layer.COMPILE] if r.attrs.get("kind") == "frame"]
    assert frame.name == "scale" and frame.values["compiles"].value == 9
    assert any("recompile limit" in str(f) for f in frame.attrs["failed"])
    found = {f.rule: f for f in findings(report)}
    fallback = found["compile.fallback"]
    assert fallback.severity == "critical" and "recompile limit" in fallback.title
    recompiles = found["compile.recompiles"]
    assert "k == 0" in recompiles.evidence[0]
    assert "Python value" in recompiles.action  # not a shape: mark_dynamic would not help



def test_the_steps_that_compiled_are_named_by_their_number_in_the_workload() -> None:
    """The recorded run's compiles all start within one step's time of the first mark: that
    step is the workload's step 1 where the step times began at the script's start
    (``--steps``), its step 2 where they began at the first step's mark (its end)."""
    import gzip

    from perfstack_plugins.compiler.rows import collected

    recorded = ROOT / "tests/fixtures/reports/compile/recompile_limit.compile.json.gz"
    with gzip.open(recorded, "rt", encoding="utf-8") as fh:
        run = read(json.load(fh))
    starts = [c.start_s for c in run.compiles if c.start_s is not None]
    first_mark, times = min(starts) - 0.001, [max(starts) - min(starts) + 1.0, 1.0]
    for first_step in (1, 2):
        layer = collected([run], run, None, first_mark, times, None, first_step=first_step)
        assert f"steps that compiled: {first_step}" in layer.notes, layer.notes

def test_every_frame_at_its_limit_is_counted() -> None:
    """Issue 70: 30 functions each compiled to the recompile limit (270 compiles) were "1
    frame", with the fallback and recompile findings for one: functions of one name, file
    and line (made from one source) are told apart by dynamo's frame id, every compile is
    counted, and the findings say 30 frames. (tests/workloads/recompile_many.py's records.)"""
    import gzip

    from perfstack_plugins.compiler.findings import findings
    from perfstack_plugins.compiler.rows import collected

    from perfstack.analysis.panes.compile import compile_view
    from perfstack.render.words.compile import compile_lines
    from perfstack.report import Report, RunInfo

    recorded = ROOT / "tests/fixtures/reports/compile/recompile_many.compile.json.gz"
    with gzip.open(recorded, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    run = read(data)
    assert len(data["records"]) == 270 and len(run.frames) == 30
    assert all(len(f.compiles) == 9 for f in run.frames) and run.recompiles == 240
    layer = collected([run], run, None, None, [], None)
    report = Report(RunInfo(command=["python", str(ROOT / "tests/workloads/recompile_many.py")],
                            cwd=str(ROOT), started="", duration_s=1.0, perfstack_version="0",
                            repeat=1, warmup=0, timeout_s=None, complete=True),
                    {}, layers=layer.rows, metrics=layer.metrics)
    frames = [r for r in report.layers[Layer.COMPILE] if r.attrs.get("kind") == "frame"]
    assert len({r.key for r in frames}) == 30  # one key each, though one name and line
    found = {f.rule: f for f in findings(report)}
    assert found["compile.fallback"].title.startswith("torch.compile gave up on 30 frames")
    assert found["compile.recompiles"].title == \
        "torch.compile compiled again 240 times over 30 frames"
    view = compile_view(report)
    assert view is not None and view.compiles == 270 and view.failed == 30
    lines = compile_lines(view)
    assert "30 frame(s), 270 compile(s)" in lines[0]
    assert len(lines) <= 4  # 30 frames alike: a line each for recompiled and failed


def test_a_run_stopped_while_it_compiles_keeps_its_compile_layer(tmp_path: Path) -> None:
    """Issue 70: a workload with very many graph breaks was stopped (exit 143) and the
    compile layer was "skipped": dynamo's records were written only at the workload's end
    (and dynamo swallows the SystemExit a SIGTERM raises while it compiles). They are also
    written every few seconds while it compiles: a stopped run has its compile layer, and
    says it is of the compiles until then."""
    import signal
    import time

    from tests.conftest import perfstack_env

    workload = tmp_path / "compiles_then_hangs.py"
    workload.write_text(
        "import time\nimport torch\n"
        "def f(x):\n    x = x + 1\n    torch._dynamo.graph_break()\n    return x * 2\n"
        "torch.compile(f, backend='eager')(torch.randn(4))\n"
        "time.sleep(120)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfstack", "run", "--plugins", "dynamo", "--repeat", "1",
         "--warmup", "0", "-q", "--out-dir", "run", "-o", "report.json", str(workload)],
        cwd=tmp_path, env=perfstack_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    snapshot = tmp_path / "run" / "baseline-1" / "compile.json"
    deadline = time.monotonic() + 90
    while not snapshot.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert snapshot.exists(), proc.communicate()[1]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    report = json.loads((tmp_path / "report.json").read_text())
    rows = report["layers"]["compile"]
    assert any(r["attrs"].get("kind") == "graph-break" for r in rows)
    dynamo = next(b for b in report["backends"] if b["name"] == "dynamo")
    assert any("until the last snapshot" in n for n in dynamo["notes"]), dynamo


def test_a_live_run_names_the_break_and_the_recompile_and_torch_changes_neither(
        tmp_path: Path) -> None:
    """One live run of the workload (small, eager backend): the report names the break at
    its line and the recompile with its guard. The torch backend's module ranges are global
    forward hooks: dynamo once traced them into the compiled model (and failed on them), then
    compiled them as frames of their own; its run compiles what the baseline's does, frame
    for frame."""
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "perfstack", "run", "-q", "--plugins", "torch,dynamo",
         "--repeat", "1", "--warmup", "0", "-o", str(out), "--out-dir", str(tmp_path / "run"),
         str(WORKLOAD), "--", "--steps", "6", "--batch-sizes", "4,6", "--width", "8",
         "--hidden", "8", "--backend", "eager"],
        capture_output=True, text=True, timeout=180, cwd=tmp_path,
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

    def compiled(run: str) -> list[tuple[str, str]]:
        data = json.loads((tmp_path / "run" / run / "compile.json").read_text("utf-8"))
        return [(r["compile_id"], r["co_name"]) for r in data["records"] if r.get("co_name")]

    assert compiled("torch") == compiled("baseline-1")
    assert [name for _, name in compiled("torch")].count("forward") == 2


def test_how_much_of_a_step_ran_compiled_on_the_gpu(tmp_path: Path) -> None:
    """The H200 run's torch trace: the compiled graphs' regions and backwards hold 69% of the
    profiled steps' host time (the rest: the eager optimizer step and the loss), and
    inductor's Triton kernels 17% of the device time (the matrix products are cuBLAS's)."""
    import shutil

    from perfstack_plugins.torchprof.rows import summarize
    from perfstack_plugins.torchprof.trace import TraceAggregate

    trace = tmp_path / "rank.pt.trace.json.gz"
    shutil.copy(GPU_RUNS / "torch" / "vm_1207.0.pt.trace.json.gz", trace)
    agg = TraceAggregate()
    agg.add_file(trace)
    rows, metrics, _ = summarize(agg, with_flops=True, stepped=True)
    found = {m.name: m for m in metrics}
    assert found["compiled_share"].value == pytest.approx(69.2, abs=0.5)
    assert found["generated_kernels_share"].value == pytest.approx(16.9, abs=0.5)
    triton = [r for r in rows[Layer.KERNEL] if r.name.startswith("triton_")]
    assert len(triton) == 7


def test_a_step_that_compiled_says_so() -> None:
    """dynamo's timed ranges inside an op of the step (the compiled model's call) are the
    step's compile phase, out of the op's time: the recompiling step is named for it."""
    from perfstack_plugins.torchprof.steps import cpu_steps

    windows = [(0.0, 3000.0), (3000.0, 600000.0), (600000.0, 603000.0)]
    children = [(100.0, 2900.0, "ops"), (3100.0, 599000.0, "ops"),
                (3200.0, 560000.0, "compile_in"), (600100.0, 602900.0, "ops")]
    phases = {m.name: m.samples for m in cpu_steps(windows, children)}
    assert phases["cpu_step.compile"] == pytest.approx([0.0, 0.5568, 0.0])
    assert phases["cpu_step.ops"] == pytest.approx([0.0028, 0.0391, 0.0028])


RECORDED = ROOT / "tests" / "fixtures" / "reports" / "compile"


def test_a_compiled_run_reads_as_compiling_in_every_format() -> None:
    """workloads/compiled.py on 2 CPUs, inductor's caches warm: the answer is the compiler
    (was 'Mostly start-up'), the compile section says what it compiled, why it compiled
    again and where the graph broke, and the HTML has a Compile pane."""
    from perfstack.plugin.load import load_plugins
    from perfstack.plugin.renderer import RenderOptions
    from perfstack.report.files import load_report

    report = load_report(RECORDED / "compiled.json.gz")
    renderers = load_plugins().renderers()
    text = renderers["text"].render(report, RenderOptions(width=80))
    assert "Mostly compiling: torch.compile" in text
    section = text[text.index("torch.compile: what it compiled"):]
    assert "Compiling took " in section and "(the median of 3 baseline runs)" in section
    assert (f"Graph break at compiled.py:{RECORDED_BREAK_LINE} in forward, crossed 3 times"
            " in the profiled steps") in " ".join(section.split())
    assert "compiled again: tensor 'x' size mismatch at index 0" in section
    assert "ran inside compiled graphs" in section
    assert all(len(line) <= 80 for line in text.splitlines())
    markdown = renderers["markdown"].render(report, RenderOptions())
    assert "### torch.compile: what it compiled" in markdown and "| frame |" in markdown
    html = renderers["html"].render(report, RenderOptions())
    assert 'id="pane-compile"' in html and 'id="compile"' in html


def test_a_diff_that_removed_a_graph_break_leads_with_it() -> None:
    from perfstack.analysis.diff import diff
    from perfstack.report.files import load_report

    d = diff(load_report(RECORDED / "compiled.json.gz"),
             load_report(RECORDED / "compiled_nobreak.json.gz"))
    assert d.lead is not None
    first = d.lead.explain[0]
    assert (first.layer, first.kind, first.status) == ("compile", "graph-break", "vanished")


def test_compiling_is_weighed_against_what_it_saves_a_step() -> None:
    from perfstack.analysis.diff.lead import payback
    from perfstack.report import Better, Metric, Report, RunInfo

    def side(compile_s: float | None, step_s: float) -> Report:
        run = RunInfo(command=["python", "t.py"], cwd="/", started="", duration_s=1.0,
                      perfstack_version="0", repeat=3, warmup=1, timeout_s=None,
                      complete=True)
        metrics = [Metric("step_time", step_s, "s", "run", "baseline", Better.LOWER)]
        if compile_s is not None:
            metrics.append(Metric("compile_time", compile_s, "s", "compile", "dynamo",
                                  Better.LOWER))
        return Report(run, {}, metrics=metrics)

    said = payback(side(None, 0.0121), side(34.0, 0.0100))
    assert said == "compiling took 34 s more a run; at 2.1 ms saved a step it pays back " \
                   "after 16,191 steps"
    assert "never pays back" in (payback(side(None, 0.010), side(5.0, 0.011)) or "")
    assert payback(side(2.0, 0.010), side(2.0, 0.009)) is None  # no more compiling


def test_the_first_run_s_cold_compile_is_told_apart_from_the_warm_runs() -> None:
    """inductor's FX graph cache makes the runs after the first compile in a fraction of
    the time (2.2 s against 21.8 s on 2 CPUs): the baseline's compile time is the warm one,
    and the session's first run (a warm-up) says what a cold cache costs."""
    from perfstack_plugins.compiler.rows import collected

    cold = read(_recorded("baseline-1"))  # the H200 session's first run: 8 graphs afresh
    warm = read(_recorded("baseline-2"))
    assert (cold.cache_misses, warm.cache_hits) == (8, 8)
    got = collected([warm, read(_recorded("pyspy"))], warm, None, None, [], None, cold)
    found = {m.name: m for m in got.metrics}
    assert found["compile_time_cold"].value == pytest.approx(cold.seconds)
    assert found["compile_time"].value < found["compile_time_cold"].value / 3
    assert any("8 of 8 graphs found in it" in n for n in got.notes)


def test_a_compile_served_from_the_cache_says_so_where_inductor_s_time_is_missing() -> None:
    """A warm run on the H200 found every graph in inductor's cache: inductor recorded no
    time of its own, and the frame's row once said 'the backend compiler is not inductor'."""
    from perfstack_plugins.compiler.rows import frame_row

    warm = read(_recorded("baseline-2"))
    forward = next(f for f in warm.frames if f.name == "forward")
    assert all(c.cached for c in forward.compiles)
    reason = frame_row(forward).values["inductor_time"].reason or ""
    assert "cache" in reason and "not inductor" not in reason
    cold = read(_recorded("baseline-1"))  # compiled afresh: inductor's own time recorded
    first = next(f for f in cold.frames if f.name == "forward")
    assert frame_row(first).values["inductor_time"].value


def test_the_compile_layer_rides_along_unless_refused(tmp_path: Path) -> None:
    """Issue 72: `--plugins pyspy,torch` showed nothing of torch.compile, though its backend
    costs no run (it reads the baseline runs). It rides along with any --plugins, the report
    saying so, unless refused with -dynamo."""
    from tests.conftest import perfstack_in

    script = str(ROOT / "tests/workloads/recompile_limit.py")
    plan = perfstack_in(tmp_path, "run", "--plugins", "resources", "--dry-run", script)
    assert plan.code == 0 and "dynamo: no run of its own" in plan.stdout, plan.stdout
    refused = perfstack_in(tmp_path, "run", "--plugins", "resources,-dynamo", "--dry-run",
                           script)
    assert refused.code == 0 and "dynamo" not in refused.stdout, refused.stdout
    run = perfstack_in(tmp_path, "run", "--plugins", "resources", "--repeat", "1", "--warmup",
                       "0", "-q", "-o", "r.json", script)
    assert run.code == 0, run.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    dynamo = next(b for b in report["backends"] if b["name"] == "dynamo")
    assert dynamo["status"] == "ok" and any(n.startswith("rode along") for n in dynamo["notes"])
    assert any(r["attrs"].get("kind") == "frame" for r in report["layers"]["compile"])
