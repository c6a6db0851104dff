"""perfstack run end to end: real child processes, real reports, validated every time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import WORKLOADS, Result, backend, overhead_of, perfstack_env

FAST = ("--repeat", "2", "--warmup", "0", "--plugins", "resources")


def test_run_writes_a_valid_layered_report(perfstack, tmp_path):
    result = perfstack("run", *FAST, str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    report = result.report()
    assert report["run"]["complete"] is True
    assert [r["id"] for r in report["run"]["runs"]] == ["baseline-1", "baseline-2"]
    assert all(r["exit"] == {"status": "exited", "code": 0, "signal": None, "signal_name": None}
               for r in report["run"]["runs"])
    resources = backend(report, "resources")
    assert resources["status"] == "ok" and resources["package"].startswith("perfstack ")
    # The OS's accounting reaches the hardware layer, with each repeat kept as a sample.
    rows = {r["key"]: r for r in report["layers"]["hardware"]}
    assert rows["rusage.user_s"]["values"]["median"]["value"] > 0.05
    wall = next(m for m in report["metrics"] if m["name"] == "wall_time")
    assert len(wall["samples"]) == 2 and wall["value"] > 0.05
    # Raw outputs are kept beside the report and referenced relatively.
    run_dir = (tmp_path / ".perfstack/runs/latest").resolve()
    stdout = report["run"]["runs"][0]["stdout"]
    assert not os.path.isabs(stdout) and (run_dir / stdout).is_file()
    # The terminal report names every layer, and says what would fill the empty ones.
    for title in ("Python", "Framework", "Kernel", "Hardware", "Backends", "Metrics"):
        assert title in result.stdout
    assert "not measured (--plugins" in result.stdout


def test_workload_sees_what_plain_python_gives_it(perfstack, tmp_path):
    script = WORKLOADS / "echo_argv.py"
    out = tmp_path / "echo.jsonl"
    args = ["--flag", "value with spaces", "--", "-x"]
    subprocess.run([sys.executable, str(script), *args], env={**os.environ, "ECHO_OUT": str(out)},
                   check=True, cwd=tmp_path)
    result = perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0",
                       str(script), "--", *args,
                       env={"ECHO_OUT": str(out)})
    assert result.code == 0, result.stderr
    plain, profiled = (json.loads(line) for line in out.read_text().splitlines())
    assert profiled == plain
    assert plain["name"] == "__main__" and plain["argv"][1:] == args
    assert profiled["bootstrap_env"] is False  # perfstack's own variable is not leaked


def test_module_workload_runs_like_python_dash_m(perfstack, tmp_path):
    out = tmp_path / "echo.jsonl"
    env = {"ECHO_OUT": str(out), "PYTHONPATH": f"{WORKLOADS}:{Path(__file__).parent.parent}"}
    subprocess.run([sys.executable, "-m", "pkgmod", "a", "b"], check=True, cwd=tmp_path,
                   env={**os.environ, **env})
    result = perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0", "-m",
                       "pkgmod", "--", "a", "b", env=env)
    assert result.code == 0, result.stderr
    plain, profiled = (json.loads(line) for line in out.read_text().splitlines())
    assert profiled == plain and plain["argv"][1:] == ["a", "b"]
    assert result.report()["run"]["command"] == ["python", "-m", "pkgmod", "a", "b"]


def test_a_perfstack_folder_where_the_user_stands_does_not_shadow_perfstack(perfstack, tmp_path):
    shadow = tmp_path / "perfstack"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the wrong perfstack')")
    (shadow / "bootstrap.py").write_text("raise SystemExit('the wrong bootstrap ran')")
    # The console script, as users run it (python -m perfstack would itself import the shadow).
    script = Path(sys.executable).parent / "perfstack"
    proc = subprocess.run([str(script), "run", "--plugins", "resources", "--repeat", "1",
                           "--warmup", "0", str(WORKLOADS / "reports_metric.py")],
                          cwd=tmp_path, capture_output=True, text=True, env=perfstack_env())
    result = Result(proc.returncode, proc.stdout, proc.stderr, tmp_path)
    assert result.code == 0, result.report()["run"]["runs"][0]["stderr_tail"]
    assert any(m["name"] == "throughput" for m in result.report()["metrics"])


def test_output_and_out_dir(perfstack, tmp_path):
    result = perfstack("run", *FAST, "-o", "reports/r.json.gz", "--out-dir", "art",
                       str(WORKLOADS / "busy.py"), "-q")
    assert result.code == 0, result.stderr
    assert result.stdout == ""  # --quiet
    report = result.report("reports/r.json.gz")
    stdout = report["run"]["runs"][0]["stdout"]
    assert (tmp_path / "reports" / stdout).resolve().is_file()
    assert stdout.startswith("../art/")
    # An --out-dir that is not empty is refused before anything runs: nothing overwritten.
    again = perfstack("run", "--out-dir", "art", str(WORKLOADS / "busy.py"))
    assert again.code == 7 and "not an empty folder" in again.stderr


def test_every_backend_runs_in_isolation_with_its_overhead(perfstack):
    result = perfstack("-p", "tests.testplugins.probe", "run", "--repeat", "2", "--warmup", "0",
                       "--plugins", "probe,resources", "--probe-label", "hello",
                       str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    report = result.report()
    probe = backend(report, "probe")
    assert probe["status"] == "ok", probe
    assert probe["run"] == "probe" and probe["notes"] == ["probe note"]
    overhead = overhead_of(probe)  # None only where the load moved between the runs
    assert overhead is None or (overhead["baseline_n"] == 2 and overhead["ratio"] > 0)
    assert probe["artifacts"]["inprocess"] == "probe/inprocess.json"
    row = report["layers"]["python"][0]
    # Wrapper, environment, in-process hook and attachment all reached the same process.
    assert row["attrs"]["wrapped"] == "yes" and row["attrs"]["label"] == "hello"
    assert row["attrs"]["attached_pid"] == row["values"]["pid"]["value"]
    assert row["attrs"]["outcome_pid"] == row["values"]["pid"]["value"]
    run = next(r for r in report["run"]["runs"] if r["id"] == "probe")
    assert run["argv"][:2] == ["env", "PROBE_WRAPPED=yes"]
    # A workload-derived name full of markup is shown as text, not interpreted (the layer
    # tables are in the full report).
    shown = perfstack("show", "--full")
    assert shown.code == 0, shown.stderr
    assert "probe [bold]<script>" in shown.stdout


def test_workload_reported_metrics_get_one_sample_per_baseline_run(perfstack):
    result = perfstack("run", "-q", "--repeat", "3", "--warmup", "1", "--plugins", "resources",
                       str(WORKLOADS / "reports_metric.py"))
    assert result.code == 0, result.stderr
    metric = next(m for m in result.report()["metrics"] if m["name"] == "throughput")
    assert metric["source"] == "workload" and metric["unit"] == "steps/s"
    assert metric["better"] == "higher" and len(metric["samples"]) == 3
    assert metric["value"] == sorted(metric["samples"])[1]
    # NaN is not a measurement: dropped rather than written into the report.
    assert all(m["name"] != "not_a_number" for m in result.report()["metrics"])


def test_step_and_report_metric_are_no_ops_without_perfstack():
    import subprocess
    import sys

    from tests.conftest import ROOT

    subprocess.run([sys.executable, str(WORKLOADS / "reports_metric.py")], check=True, cwd=ROOT)


def test_repeat_0_is_a_quick_look_that_says_what_it_lacks(perfstack):
    """--repeat 0 --warmup 0: the backend's run only. The wall time and the overhead are
    unknown with their reason (never 0), a backend that reads the baseline is skipped and says
    why, every format says there was no baseline, and the report validates. ab, sweep and a
    torchrun job refuse it (they compare or find things in the baseline runs)."""
    script = str(WORKLOADS / "busy.py")
    # A second of work (100 steps of 10 ms): py-spy attached to busy.py's 0.2 s, on a slow
    # moment of the machine, sampled nothing once in five fresh-clone runs ("empty").
    result = perfstack("run", "--plugins", "pyspy,resources", "--repeat", "0", "--warmup", "0",
                       "-o", "r.json", str(WORKLOADS / "long_loop.py"), "--", "100",
                       env={"COLUMNS": "80"})
    assert result.code == 0, result.stderr
    report = result.report("r.json")
    assert [r["role"] for r in report["run"]["runs"]] == ["backend"]
    wall = next(m for m in report["metrics"] if m["name"] == "wall_time")
    assert wall["value"] is None and "--repeat 0" in wall["reason"]
    spy = backend(report, "pyspy")
    assert spy["status"] == "ok" and spy["overhead"] is None
    assert "--repeat 0" in spy["overhead_note"]
    resources = backend(report, "resources")
    assert resources["status"] == "skipped" and "--repeat 0" in resources["reason"]
    assert "no baseline (--repeat 0)" in result.stdout
    assert "n/a (n/a)" not in result.stdout
    assert perfstack("validate", "r.json").code == 0
    markdown = perfstack("show", "r.json", "--format", "markdown")
    assert "no baseline (--repeat 0)" in markdown.stdout
    for refused in (("ab", "--repeat", "0", script, script),
                    ("sweep", "--repeat", "0", "--env", "X=1,2", script),
                    ("run", "--repeat", "0", "--nproc-per-node", "2", script)):
        out = perfstack(*refused)
        assert out.code == 2 and "--repeat" in out.stderr, (refused, out.stderr)


def _run_counts(stderr: str) -> list[str]:
    """The progress lines' 'perfstack: run K of N', in order."""
    return [line.split(",")[0] for line in stderr.splitlines()
            if line.startswith("perfstack: run ")]


def test_the_run_count_leaves_out_unavailable_backends_from_the_start(perfstack):
    """Progress said 'run 4 of 10' then 'run 5 of 9' when an unavailable backend's turn came."""
    result = perfstack("-p", "tests.testplugins.absent", "run", "--plugins", "absent,resources",
                       "--repeat", "2", "--warmup", "0", "-q", str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    assert _run_counts(result.stderr) == ["perfstack: run 1 of 2", "perfstack: run 2 of 2"], \
        result.stderr
    absent = next(b for b in result.report()["backends"] if b["name"] == "absent")
    assert absent["status"] == "unavailable"


def test_a_backend_makes_the_runs_the_plan_counted(perfstack):
    """run_count is asked once, when the session plans: a backend that answered 2 for the plan
    and 3 at its turn made 3 runs of a plan of 2 ('run 3 of 2')."""
    result = perfstack("-p", "tests.testplugins.fickle", "run", "--plugins", "fickle",
                       "--repeat", "0", "--warmup", "0", "-q", str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    assert _run_counts(result.stderr) == ["perfstack: run 1 of 2", "perfstack: run 2 of 2"], \
        result.stderr
    fickle = next(b for b in result.report()["backends"] if b["name"] == "fickle")
    assert "runs made: 2; run_count asked 1 time(s)" in fickle["notes"], fickle


def test_quick_is_one_baseline_and_the_quick_backends(perfstack):
    """--quick: a sampler and what reads the baseline, one baseline run, no warm-up; the
    sampler's run first, and its answer said before the baseline runs (the report refines
    it); the text says the hardware layer was measured (its figures are the metrics)."""
    from perfstack.plugin.load import load_plugins

    backends = load_plugins().backends()[0]
    quick = sorted(n for n, e in backends.items() if e.backend.quick)
    assert "pyspy" in quick and "resources" in quick
    # long enough for py-spy to sample the script on a busy machine (see the test below)
    result = perfstack("run", "--quick", str(WORKLOADS / "long_loop.py"), "--", "50",
                       env={"COLUMNS": "80"})
    assert result.code == 0, result.stderr
    report = result.report()
    assert [r["id"] for r in report["run"]["runs"]] == ["pyspy", "baseline-1"]
    assert {b["name"] for b in report["backends"]} == set(quick) & {
        n for n, e in backends.items() if e.backend.check().ok}
    assert "run 1 of 2, pyspy" in result.stderr and "run 2 of 2, baseline-1" in result.stderr
    said = result.stderr.index("so far (pyspy in, 1 of ")
    assert said < result.stderr.index("run 2 of 2, baseline-1")
    _said_within(result.stderr[said:], 80)
    # against the later baseline (unknown, and said, only where the load moved meanwhile)
    overhead_of(backend(report, "pyspy"))
    assert "Hardware   resources 12 rows, shown as metrics" in result.stdout
    assert "not measured (--plugins nvml, perf, resources)" not in result.stdout
    again = perfstack("run", "--quick", "--repeat", "2", "--dry-run", str(WORKLOADS / "busy.py"))
    assert again.code == 0 and "baseline: 2 run(s)" in again.stdout  # --repeat given: kept
    assert again.stdout.index("pyspy: one run, first") < again.stdout.index("baseline:")
    both = perfstack("run", "--quick", "--plugins", "torch", str(WORKLOADS / "busy.py"))
    assert both.code == 2 and both.stderr.count("\n") == 1 and "--quick" in both.stderr
    sweep = perfstack("sweep", "--quick", "--env", "A=1,2", str(WORKLOADS / "busy.py"))
    assert sweep.code == 2 and "--quick" in sweep.stderr


def _said_within(stderr: str, width: int) -> None:
    """The answer so far: a line of its own, then its sentences, each wrapped to the
    terminal (it was one line of 474 characters)."""
    lines = stderr.splitlines()
    said = [lines[0]] + [ln for ln in lines[1:] if ln.startswith("perfstack:   ")]
    assert all(len(ln) <= width for ln in said), said
    text = " ".join(ln.removeprefix("perfstack:").strip() for ln in said[1:])
    assert "(pyspy)." in text and "long_loop.py:" in text, said


def test_the_answer_comes_as_soon_as_a_sampler_is_in(perfstack):
    """A session of several backends says the answer of the runs so far once the first
    backend that gives one is in, before the others run (the report refines it); the
    default order runs the sampler first, before the warm-up and the baseline
    (--baseline-first: after them)."""
    # 50 steps of 10 ms of the script's own Python (by the clock, on any machine's speed):
    # py-spy, which needs 0.1-0.3 s to attach, samples it on a busy machine too. (busy.py's
    # 0.2 s of spinning was over before py-spy sampled it in 2 of 20 runs.)
    result = perfstack("run", "--plugins", "pyspy,perf", "--repeat", "1", "--warmup", "0",
                       str(WORKLOADS / "long_loop.py"), "--", "50")
    assert result.code == 0, result.stderr
    said = result.stderr.index("so far (pyspy in, 1 of 2 backends; the report refines it):")
    assert said < result.stderr.index(", perf: exit 0")
    _said_within(result.stderr[said:], 100)
    order = perfstack("run", "--dry-run", str(WORKLOADS / "busy.py")).stdout
    assert order.index("pyspy") < order.index("warm-up") < order.index("torch"), order
    assert "pyspy: one run, first: the answer comes after it" in order
    before = perfstack("run", "--dry-run", "--baseline-first", str(WORKLOADS / "busy.py")).stdout
    assert before.index("warm-up") < before.index("pyspy") and "first:" not in before, before


def test_a_printed_throughput_is_the_workload_s_figure(perfstack, tmp_path):
    """A benchmark that prints 'throughput: 1,234.5 items/s' and never calls perfstack: its
    figure is the run's throughput (once the diff fell back to the wall time), and diff leads
    with it."""
    script = str(WORKLOADS / "prints_throughput.py")
    for out in ("a.json", "b.json"):
        run = perfstack("run", "--plugins", "resources", "--repeat", "2", "--warmup", "0",
                        "-q", "-o", str(tmp_path / out), script)
        assert run.code == 0, run.stderr
    report = json.loads((tmp_path / "a.json").read_text())
    found = next(m for m in report["metrics"] if m["name"] == "throughput")
    assert found["unit"] == "items/s" and found["better"] == "higher" and found["value"] > 0
    assert len(found["samples"]) == 2 and "as the workload printed it" in found["description"]
    compared = perfstack("diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                         "--format", "json")
    assert json.loads(compared.stdout)["lead"]["figure"] == "throughput", compared.stdout[:500]
