"""perfstack diff: environment first, metrics judged against noise, rows by the time they moved.

Statistical honesty on real runs, compared the honest way (``perfstack ab``: runs interleaved,
so machine drift hits both sides alike): the workload with 30% more matrix products in one
function is caught, and the diff names that function, its op and the metric. A/A and machine
drift are in test_ab.py and test_drift.py. pyperf's compare_to agrees with our unpaired test.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perfstack.analysis.diff import diff
from perfstack.report import Better, Metric, Report
from perfstack.report.files import load_report, read_json
from tests.conftest import (
    ROOT,
    WORKLOADS,
    Result,
    assert_one_line_error,
    perfstack_env,
    perfstack_in,
)

A = WORKLOADS / "ab_work.py"
B = WORKLOADS / "ab_work_b.py"


def _cli(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfstack", *args], cwd=cwd,
                          env=perfstack_env(), capture_output=True, text=True, timeout=timeout)


#: A real ``perfstack ab`` session, recorded on the 2-CPU VM (tests/fixtures/reports/README.md):
#: A and B (30% more matmuls), torch, py-spy at 500 Hz without the GIL pass, resources, 5
#: pairs of baseline runs interleaved, gated at 10% (it failed: exit 1). Recorded, so that
#: every verdict below is a function of the code: the same session judged live is noisy
#: (a disturbed window, OpenMP threads spinning), and what a live ab session must always do
#: (pair, interleave, catch a 3x change) is tests/test_ab.py's.
RECORDED_AB = ROOT / "tests/fixtures/reports/ab_work"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The recorded ab session's two reports and ``ab --format json`` output, copied into a
    folder of the test's own."""
    cwd = tmp_path_factory.mktemp("ab")
    (cwd / "ab" / "base").mkdir(parents=True)
    (cwd / "ab" / "new").mkdir()
    out = {"a": cwd / "ab/base/report.json", "b": cwd / "ab/new/report.json",
           "ab": cwd / "ab.json"}
    for key, name in (("a", "base"), ("b", "new"), ("ab", "ab")):
        out[key].write_text(json.dumps(read_json(RECORDED_AB / f"{name}.json.gz")))
    return out


def _diff_json(cwd: Path, a: Path, b: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    proc = _cli(cwd, "diff", str(a), str(b), "--format", "json", *extra)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


#: The gate: 30% more matmuls make ab_work's throughput about 20% lower.
GATE = "10%"


def _report_with(step_samples: list[float], walls: list[float]) -> Report:
    """A real (recorded) report with its metrics replaced by the two under test."""
    report = load_report(ROOT / "tests/fixtures/reports/v1-busy.json")
    report.metrics = [
        Metric("wall_time", sorted(walls)[len(walls) // 2], "s", "run", "baseline",
               Better.LOWER, samples=walls),
        Metric("torch_step_time", sorted(step_samples)[len(step_samples) // 2], "s",
               "framework", "torch", Better.LOWER, samples=step_samples, samples_of="steps")]
    return report


def test_steps_of_one_run_are_judged_against_the_run_to_run_noise() -> None:
    """Per-step times of one profiled run agree closely among themselves; a t-test on them
    calls a 3% shift between two runs significant. diff judges them against 3x the wall time's
    noise instead, and never gates on them."""
    walls = [1.00, 1.02, 0.99, 1.01, 1.03]
    base = _report_with([0.0200, 0.0201, 0.0199, 0.0200, 0.0202, 0.0200, 0.0201, 0.0199], walls)
    near = _report_with([0.0206, 0.0207, 0.0205, 0.0206, 0.0208, 0.0206, 0.0207, 0.0205], walls)
    far = _report_with([0.0300, 0.0301, 0.0299, 0.0300, 0.0302, 0.0300, 0.0301, 0.0299], walls)
    step = next(m for m in diff(base, near).metrics if m.name == "torch_step_time")
    assert step.verdict == "within noise" and step.samples_of == "steps", step
    result = diff(base, far)
    step = next(m for m in result.metrics if m.name == "torch_step_time")
    # beyond this noise, but one profiled run a side: changed, never called a regression
    assert step.verdict == "changed" and "one run per side" in step.reason, step
    assert result.regressions(0.05) == []
    alone = _report_with([0.0200, 0.0201, 0.0199], [1.0])
    alone_too = _report_with([0.0300, 0.0301, 0.0299], [1.1])
    step = next(m for m in diff(alone, alone_too).metrics if m.name == "torch_step_time")
    assert step.verdict == "cannot judge" and "--repeat" in step.reason, step


def test_a_b_names_the_function_the_op_and_the_metric(runs: dict[str, Path]) -> None:
    """30% more matmuls in matmul_block: throughput regresses significantly by the paired
    test (exit 1), and the function and aten::mm lead their layers, beyond noise; the
    pure-Python function beside it moves far less time. ``ab`` itself said the same."""
    session = json.loads(runs["ab"].read_text())
    assert "throughput" in session["gate"]["regressions"], session["gate"]
    code, data = _diff_json(runs["a"].parent, runs["a"], runs["b"],
                            "--fail-on-regression", GATE)
    assert code == 1
    assert "throughput" in data["gate"]["regressions"]
    throughput = next(m for m in data["metrics"] if m["name"] == "throughput")
    assert throughput["verdict"] == "regression" and throughput["change"] < -0.10
    assert throughput["test"] == "paired t-test"
    python = [r for r in data["rows"]["python"] if r["source"] == "pyspy"]
    # Interpreter start-up (torch's import, compiled afresh: PYTHONDONTWRITEBYTECODE=1 here)
    # moves by chance too; among the workload's own functions matmul_block leads, and it is
    # among the top rows overall.
    ours = [r for r in python if "ab_work.py" in r["key"]]
    assert "matmul_block" in ours[0]["name"], [r["name"] for r in ours[:3]]
    assert ours[0] in python[:3], [r["name"] for r in python[:3]]
    grown = ours[0]
    seen = {k: grown[k] for k in ("base", "new", "change", "corrected_change", "beyond_noise",
                                  "counts")}
    assert grown["delta"] > 0, seen
    # One profiled run a side: when that pair of runs moved (the probes), "within noise" is
    # the honest answer for the row; otherwise 30% more matmuls are beyond noise.
    # A row's change must also clear 3x the run-to-run noise of the wall time (the spread of
    # the baseline runs): a disturbed baseline run makes "within noise" the honest answer.
    drift = (1 + grown["change"]) / (1 + grown["corrected_change"]) - 1
    noise = max(statistics.stdev(w) / statistics.mean(w) for w in (
        next(m["samples"] for m in read_json(path)["metrics"] if m["name"] == "wall_time")
        for path in (runs["a"], runs["b"])))
    # And the row's own counting noise: py-spy's samples are Poisson counts (2 standard
    # deviations of the ratio; ~300 samples a side ask for a 16% move, which a 30% change
    # corrected for a 4% drift once missed).
    counts = next(c for c in (grown["counts"].get(k) for k in ("samples", "self")) if c)
    sampled = 2 * (1 / counts[0] + 1 / counts[1]) ** 0.5
    limit = max(0.15, 3.3 * noise, sampled)
    if abs(drift) < 0.05 and min(grown["change"], grown["corrected_change"]) > limit:
        assert grown["beyond_noise"] is True, {**seen, "drift": drift, "noise": noise,
                                               "limit": limit}
    # python_part's code is the same on both sides, but its time is not quite: after B's
    # extra matmuls torch's OpenMP threads spin on the 2 CPUs while it runs (measured: 20-29%
    # more samples in B in 3 of 4 sessions, 32-52 samples a side, a 2-sigma counting limit
    # of ~40%). Whether that is "beyond noise" is the counting test's to say; what must hold
    # is that the function with the extra work moved far more time than the one without.
    same = next(r for r in ours if r["name"].startswith("python_part"))
    assert abs(same["delta"]) < grown["delta"] / 3, (same, seen)
    framework = [r for r in data["rows"]["framework"] if r["source"] == "torch"]
    assert framework[0]["name"].startswith("aten::mm"), [r["name"] for r in framework[:3]]
    # The op's time is one profiled window per run (noisy: a disturbed window once took 2.5x
    # as long in an A run); its call count is exact: 20 -> 26 matmuls per step.
    base_calls, new_calls = framework[0]["counts"]["calls"]
    assert new_calls == pytest.approx(1.3 * base_calls)
    text = _cli(runs["a"].parent, "diff", str(runs["a"]), str(runs["b"]),
                "--fail-on-regression", GATE).stdout
    assert "FAIL" in text and "throughput" in text and "matmul_block" in text
    assert "aten::mm" in text and "interleaved" in text


def test_environment_differences_come_first(runs: dict[str, Path], tmp_path: Path) -> None:
    """Another torch and thread setting in the new report: said at the top, before metrics."""
    data = read_json(runs["b"])
    data["environment"]["torch"]["version"] = "2.99.0"
    data["environment"]["threads"] = {"OMP_NUM_THREADS": "1"}
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(data))
    proc = _cli(tmp_path, "diff", str(runs["a"]), str(changed))
    assert proc.returncode == 0, proc.stderr
    head = proc.stdout.split("Metrics")[0]
    assert "ENVIRONMENT DIFFERS" in head and "torch version" in head and "2.99.0" in head
    assert "OMP_NUM_THREADS" in head


def _unpaired(path: Path, out: Path) -> Path:
    """A copy of a report without its pairing and probes: an ordinary two-sample comparison."""
    data = read_json(path)
    data["run"].pop("pairing", None)
    for run in data["run"]["runs"]:
        run.pop("probe", None)
    out.write_text(json.dumps(data))
    return out


def test_pyperf_compare_to_agrees(runs: dict[str, Path], tmp_path: Path) -> None:
    """Unpaired and with no between-session band, our verdicts are pyperf compare_to's."""
    a = _unpaired(runs["a"], tmp_path / "a.json")
    b = _unpaired(runs["b"], tmp_path / "b.json")
    for name, path in (("a", a), ("b", b)):
        proc = _cli(tmp_path, "show", str(path), "--format", "pyperf", "-o",
                    f"{name}.pyperf.json")
        assert proc.returncode == 0, proc.stderr
    _, ours = _diff_json(tmp_path, a, b, "--session-noise", "0%", "--force")
    for bench in ("wall_time", "throughput"):
        pyperf = subprocess.run(
            [sys.executable, "-m", "pyperf", "compare_to", "-v", "--min-speed", "2",
             "-b", bench, "a.pyperf.json", "b.pyperf.json"], cwd=tmp_path,
            capture_output=True, text=True, timeout=60)
        assert pyperf.returncode == 0, pyperf.stderr
        assert "ignificant" in pyperf.stdout, pyperf.stdout
        theirs = "Not significant" not in pyperf.stdout
        metric = next(m for m in ours["metrics"] if m["name"] == bench)
        ours_sig = metric["verdict"] in ("regression", "improvement", "changed")
        assert ours_sig == theirs, (bench, metric, pyperf.stdout)
        t = re.search(r"t=(-?[0-9.]+)", pyperf.stdout)
        if t:
            assert abs(abs(float(t.group(1))) - abs(_t_of(ours, bench))) < 0.01


def _t_of(data: dict[str, Any], name: str) -> float:
    metric = next(m for m in data["metrics"] if m["name"] == name)
    return float(metric["statistic"])


def test_old_schema_is_migrated_and_future_ones_refused(runs: dict[str, Path],
                                                        tmp_path: Path) -> None:
    """A real version-1 report diffs against a current one; version 99 is one line, exit 5."""
    old = ROOT / "tests" / "fixtures" / "reports" / "v1-busy.json"
    assert read_json(old)["version"] == 1
    proc = _cli(tmp_path, "diff", str(old), str(runs["a"]), "--force")  # busy.py, ab_work.py
    assert proc.returncode == 0, proc.stderr
    assert "wall_time" in proc.stdout
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**read_json(runs["a"]), "version": 99}))
    proc = _cli(tmp_path, "diff", str(runs["a"]), str(future))
    assert proc.returncode == 5 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "upgrade perfstack" in proc.stderr


def test_markdown_for_a_pull_request(runs: dict[str, Path]) -> None:
    """Markdown: a heading, the gate verdict and pipe tables with escaped cells."""
    proc = _cli(runs["a"].parent, "diff", str(runs["a"]), str(runs["b"]), "--format",
                "markdown", "--fail-on-regression", "5%")
    assert proc.returncode == 1
    assert proc.stdout.startswith("## perfstack diff")
    assert "**FAIL (" in proc.stdout and "| metric | base | new |" in proc.stdout
    for line in proc.stdout.splitlines():
        if line.startswith("| "):
            assert "<" not in line  # escaped: op names like aten::mm[<shape>] cannot inject


def test_bad_diff_input_is_one_line(perfstack: Callable[..., Result]) -> None:
    """One report, no runs to default to, a missing file, a non-report, a bad percentage."""
    assert_one_line_error(perfstack("diff", "only-one.json"), 2)
    assert_one_line_error(perfstack("diff"), 3)
    assert_one_line_error(perfstack("diff", "a.json", "b.json"), 3)
    assert_one_line_error(perfstack("diff", str(ROOT / "pyproject.toml"),
                                    str(ROOT / "pyproject.toml")), 4)
    old = str(ROOT / "tests" / "fixtures" / "reports" / "v1-busy.json")
    assert_one_line_error(perfstack("diff", old, old, "--fail-on-regression", "lots"), 2)


def test_no_arguments_compares_the_two_newest_runs(perfstack: Callable[..., Result]) -> None:
    """`perfstack diff` alone: the two newest runs in .perfstack/runs, older first."""
    for _ in range(2):
        assert perfstack("run", "--plugins", "resources", "--repeat", "2", "--warmup", "0",
                         "-q", str(WORKLOADS / "busy.py")).code == 0
    result = perfstack("diff")
    assert result.code == 0, result.stderr
    runs = sorted(p.name for p in (result.cwd / ".perfstack" / "runs").iterdir()
                  if not p.is_symlink())
    older = result.stdout.index(f"{runs[0]}/report.json")
    assert result.stdout.index(f"{runs[1]}/report.json") > older, result.stdout


def test_minimum_effect_is_pyperfs_when_pyperfs_test_decides() -> None:
    """CI once saw pyperf compare_to call an A/A throughput change significant (means -2.9%)
    where we said 'below the 2% minimum effect' (medians -1.8%): with pyperf's t-test the
    minimum effect is measured as pyperf measures it, on the means."""
    from perfstack.analysis.stats import compare

    base = [65.0, 65.2, 65.1, 66.0, 68.0]
    new = [64.0, 64.1, 63.9, 64.0, 64.2]
    result = compare(base, new)
    assert result.test == "t-test (pyperf)"
    assert abs(result.change) < 0.02  # the medians moved less than 2%...
    assert result.significant, result.reason  # ...the means 2.8%, as pyperf --min-speed 2 sees
    assert not compare(base, [65.1, 65.0, 65.2, 65.1, 65.3]).significant


def test_different_workloads_are_refused_unless_forced(perfstack: Callable[..., Result]) -> None:
    """Two reports of different commands (recorded real runs of busy.py and ab_work.py): one
    line, exit 2; --force compares them anyway."""
    busy = str(ROOT / "tests/fixtures/reports/v1-busy.json")
    work = str(ROOT / "tests/fixtures/reports/ab_work/base.json.gz")
    refused = perfstack("diff", busy, work)
    assert_one_line_error(refused, 2)
    assert "different workloads" in refused.stderr and "--force" in refused.stderr
    forced = perfstack("diff", busy, work, "--force")
    assert forced.code == 0, forced.stderr


def test_the_markdown_diff_fits_a_pull_request_comment(runs: dict[str, Path]) -> None:
    """A headline first (the workload's own figure and its verdict), what changed and the rows
    that explain it, the changed metrics visible, the rest folded: a PR comment stays short;
    the environment line is there; the verdicts agree between tables."""
    proc = _cli(runs["a"].parent, "diff", str(runs["a"]), str(runs["b"]), "--format",
                "markdown")
    md = proc.stdout
    headline = md.splitlines()[2]
    assert re.match(r"\*\*throughput -\d+\.\d% \(regression\); \d+ regressions?, \d+ "
                    r"improvements?\*\*", headline), md[:500]
    visible, depth = [], 0
    for line in md.splitlines():
        depth += line.count("<details>") - line.count("</details>")
        if depth == 0 and line.strip() and "</details>" not in line:
            visible.append(line)
    assert len(visible) <= 40, "\n".join(visible)
    assert "matmul\\_block (ab\\_work.py" in "\n".join(visible), "\n".join(visible)
    assert "environment" in md.lower()
    # A metric called a regression in the metrics table is not "within noise" in the rows.
    data = json.loads(_cli(runs["a"].parent, "diff", str(runs["a"]), str(runs["b"]),
                           "--format", "json").stdout)
    verdicts = {(m["name"], m["source"]): m["verdict"] for m in data["metrics"]}
    restating = [r for rows in data["rows"].values() for r in rows if r["by_metric"]]
    assert restating  # resources' rows restate its metrics
    for row in restating:
        verdict = verdicts[(row["by_metric"], row["source"])]
        expected = (None if verdict in ("cannot judge", "unknown")
                    else verdict in ("regression", "improvement", "changed"))
        assert row["beyond_noise"] is expected, (row, verdict)


def test_the_text_diff_fits_80_columns_with_its_verdicts(runs: dict[str, Path]) -> None:
    proc = perfstack_in(runs["a"].parent, "diff", str(runs["a"]), str(runs["b"]),
                        env={"COLUMNS": "80"})
    assert proc.code == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80, [ln for ln in lines if len(ln) > 80]
    head = next(ln for ln in lines if ln.strip().startswith("metric "))
    assert "verdict" in head  # the sides' values give way first, never the verdict
    first = next(ln for ln in lines[1:] if ln and not ln.startswith(" "))  # after the paths
    assert first.startswith("throughput -") and "(regression)" in first, lines[:6]
    table = lines.index(head)
    throughput = next(ln for ln in lines[table:] if ln.strip().startswith("throughput "))
    assert "REGRESSION" in throughput


def _sampled(counts: dict[str, int], walls: list[float]) -> Report:
    """A report whose py-spy rows have these own-sample counts (10 ms a sample)."""
    from perfstack.report import Layer, Quantity, Row

    report = _report_with([0.02, 0.02, 0.02], walls)
    report.layers[Layer.PYTHON] = [
        Row(f"{name} (/w/train.py:{i})", f"{name} (/w/train.py:{i})", "pyspy",
            {"self": Quantity(n, "count"), "total": Quantity(n, "count"),
             "self_time": Quantity(n / 100, "s")},
            {"function": name, "file": "/w/train.py", "line": i})
        for i, (name, n) in enumerate(counts.items(), 1)]
    return report


def test_a_sampled_row_that_moved_with_its_whole_run_is_no_culprit() -> None:
    """One side ran on a machine a third slower: every function's samples grew by a third
    (main +32 ms and its like, once named as culprits); its share of the run did not move.
    A function that took a larger share is still named."""
    walls = [1.00, 1.02, 0.99, 1.01, 1.03]
    base = _sampled({"main": 1000, "step": 2000, "load": 1000}, walls)
    slower = _sampled({"main": 1330, "step": 2660, "load": 1330}, walls)
    rows = {r.name.split(" ")[0]: r for r in diff(base, slower).rows["python"]}
    assert not any(r.beyond_noise for r in rows.values()), [
        (r.name, r.change) for r in rows.values()]
    heavier = _sampled({"main": 1000, "step": 4000, "load": 1000}, walls)
    rows = {r.name.split(" ")[0]: r for r in diff(base, heavier).rows["python"]}
    assert rows["step"].beyond_noise and not rows["main"].beyond_noise
