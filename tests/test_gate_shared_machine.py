"""trend and gate on a shared machine, on simulated series with fixed seeds: the issue's
history (six runs of a workload, two of them hit by another process, a commit adding an extra
matmul, five more runs 4x slower) must give a change point at that commit and a failing gate,
not "no change points" and "ok". Runs disturbed by other programs are set aside (and named);
runs already regressed never vouch for the newest; quiet histories stay quiet.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from perfstack import history
from perfstack.history import Entry, Group, changepoints, gate, trend
from perfstack.machine import load as machineload
from perfstack.report.files import load_report, save_report
from tests.conftest import ROOT, Result

BUSY = ROOT / "tests/fixtures/reports/v1-busy.json"
#: The issue's throughput (samples/s): runs 3 and 4 shared the machine with another process.
BEFORE = [26_800.0, 34_400.0, 2_600.0, 3_600.0, 42_100.0, 23_700.0]
AFTER = [7_400.0, 5_000.0, 10_600.0, 10_400.0, 8_900.0]
HIT = "other programs kept 1.9 CPUs busy in 3 of 3 baseline runs"


def _group(values: list[float], disturbed: set[int], step_at: int | None) -> Group:
    """A workload's history on one machine: run i+1 has values[i]; the commit changes at
    run ``step_at`` (1-based), else every few runs."""
    runs = []
    for i in range(len(values)):
        commit = ("b" * 40 if step_at is not None and i + 1 >= step_at else "a" * 40) \
            if step_at is not None else f"{i // 3:040x}"
        runs.append(Entry(i + 1, f"2026-11-{1 + i:02d}T10:00:00+00:00", ["python", "w.py"],
                          commit, "main", False, "m1", f"r{i}.json", None,
                          disturbed=HIT if i + 1 in disturbed else None))
    return Group(["python", "w.py"], "w", "m1", runs, {"throughput": list(values)},
                 {"throughput": ("samples/s", "run", "higher")}, {}, {}, "throughput")


def test_the_issues_history_finds_the_commit_and_fails_the_gate() -> None:
    g = _group(BEFORE + AFTER, {3, 4}, step_at=7)
    t = trend.analyse(g, 0.05)
    assert [r.id for r in t.set_aside] == [3, 4]
    v = next(v for v in t.verdicts if v.series.key == "throughput")
    assert v.status == trend.CHANGED, (v.status, v.possible)
    change = v.changes[-1]
    assert change.run.id == 7 and change.previous.id == 6 and change.worse is True
    assert change.run.commit == "b" * 40 and change.previous.commit == "a" * 40
    judged = gate.gate(g, None, 0.05)
    assert len(judged) == 1 and judged[0].regression, judged
    j = judged[0]
    assert j.since is not None and j.since.id == 7 and j.runs == 5 and j.change < -0.6


def test_the_two_disturbed_runs_hid_it_before() -> None:
    """The same history without the runs marked (a history written before runs recorded the
    machine's load): the two disturbed runs make the old level as low as the new one and no
    step is found, which is what the issue saw."""
    g = _group(BEFORE + AFTER, set(), step_at=7)
    v = next(v for v in trend.analyse(g, 0.05).verdicts if v.series.key == "throughput")
    assert v.status != trend.CHANGED


def _seeded(seed: int, ratio: float, noise: float = 0.08) -> tuple[list[float], set[int]]:
    """6 runs + 5 at ``ratio`` of the level, ``noise`` relative; two of the first six runs
    disturbed (5-10x slower, and marked)."""
    rng = random.Random(seed)
    values = [30_000 * (1 + rng.gauss(0, noise)) for _ in range(6)]
    values += [30_000 * ratio * (1 + rng.gauss(0, noise)) for _ in range(5)]
    hit = set(rng.sample(range(1, 7), 2))
    for run in hit:
        values[run - 1] /= rng.uniform(5, 10)
    return values, hit


def test_a_2x_step_on_a_disturbed_machine_is_found_for_every_seed() -> None:
    for seed in range(20):
        values, hit = _seeded(seed, 0.5)
        g = _group(values, hit, step_at=7)
        v = next(v for v in trend.analyse(g, 0.05).verdicts if v.series.key == "throughput")
        assert v.status == trend.CHANGED and v.changes[-1].run.id == 7, (seed, values, v)
        j = gate.gate(g, None, 0.05)[0]
        assert j.regression and j.since is not None and j.since.id == 7, (seed, j)


def test_quiet_histories_with_disturbed_runs_stay_quiet() -> None:
    """100 histories with no step: the gate's figure is held at half its 1% (0.5%), the
    trend's at 1%; a few false alarms in 100 at most."""
    changed = failed = 0
    for seed in range(100):
        values, hit = _seeded(100 + seed, 1.0)
        g = _group(values, hit, step_at=None)
        v = next(v for v in trend.analyse(g, 0.05).verdicts if v.series.key == "throughput")
        changed += v.status == trend.CHANGED
        failed += gate.gate(g, None, 0.05)[0].regression
    assert changed <= 2 and failed <= 2, (changed, failed)


def test_regressed_runs_never_vouch_for_the_newest() -> None:
    """The issue's gate compared the newest run with all ten before it, four of which had the
    regression already: "ok". Judged from the first regressed run to the newest, it fails at
    every one of them once the step can be told (3 runs at the new level)."""
    for newest in range(9, 12):
        g = _group((BEFORE + AFTER)[:newest], {3, 4}, step_at=7)
        assert gate.gate(g, None, 0.05)[0].regression, newest


def test_an_old_step_is_the_settled_level() -> None:
    """A step older than the gate's window is the history's level: the newest run is judged
    against the runs since it, and an improvement long ago does not fail anything."""
    rng = random.Random(3)
    values = [100 * (1 + rng.gauss(0, 0.03)) for _ in range(8)]
    values += [60 * (1 + rng.gauss(0, 0.03)) for _ in range(gate.RECENT + 4)]
    g = _group(values, set(), step_at=9)
    j = gate.gate(g, None, 0.05)[0]
    assert j.since is None and not j.regression and abs(j.change) < 0.1, j


def test_a_disturbed_newest_run_cannot_be_judged(tmp_path: Path,
                                                 perfstack: Result) -> None:
    """Through the history and the CLI: reports whose baseline runs recorded the machine's
    load; the newest disturbed gives its own exit code and one sentence, and trend names the
    runs it set aside."""
    base = load_report(BUSY)
    db = tmp_path / "h.sqlite"
    rng = random.Random(9)
    for i in range(8):
        rep = copy.deepcopy(base)
        rep.run.started = f"2026-11-{1 + i:02d}T10:00:00+00:00"
        rep.environment["repository"] = {"commit": f"{i:040x}", "branch": "main",
                                         "dirty": False}
        busy = i in (2, 7)
        for r in rep.run.runs:
            r.machine_load = {"others_cpus": 1.9 if busy else 0.02, "steal": 0.0, "cpus": 2}
        for m in rep.metrics:
            if isinstance(m.value, float):
                m.value *= 1 + rng.gauss(0, 0.02)
        path = tmp_path / f"r{i}.json"
        save_report(rep, path)
        history.add(db, rep, path)
    runs = history.runs(db)
    assert [r.disturbed is not None for r in runs] == [i in (2, 7) for i in range(8)]
    assert runs[2].disturbed == "other programs kept 1.9 CPUs busy in 3 of 3 baseline runs"
    proc = perfstack("gate", "--db", str(db), env={"COLUMNS": "80"})
    assert proc.code == 12, proc.stdout + proc.stderr
    assert proc.stdout.startswith("cannot judge: the newest run was disturbed (other "
                                  "programs kept 1.9 CPUs busy"), proc.stdout
    data = json.loads(perfstack("gate", "--db", str(db), "--format", "json").stdout)
    assert data["disturbed"].startswith("other programs")
    text = perfstack("trend", "--db", str(db), env={"COLUMNS": "80"}).stdout
    assert "set aside, disturbed by other programs (2): run 3 (other programs kept 1.9" \
        in text.replace("\n    ", " "), text


def test_a_run_beside_a_busy_loop_sees_the_other_program() -> None:
    """machineload against the kernel's own counters: a busy loop started beside a
    one-second sleep keeps about one CPU busy that is not ours."""
    start = machineload.snapshot()
    if start is None:  # not Linux
        return
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                           start_new_session=True)
    try:
        began = time.perf_counter()
        time.sleep(1.0)
        load = machineload.between(start, machineload.snapshot(), time.perf_counter() - began)
    finally:
        hog.kill()
        hog.wait()
    assert load is not None and load["others_cpus"] >= machineload.DISTURBED_CPUS, load
    assert machineload.disturbed(load) is not None


def test_too_short_a_segment_for_permutations_is_judged_by_welch() -> None:
    """6 + 5 runs: a perfect split is 1 arrangement in 462, so the permutation test alone can
    never reach 0.001; a 2x step on 5% noise is still a change, and noise is not."""
    assert changepoints.short(11, 6) and not changepoints.short(30, 15)
    rng = random.Random(1)
    step = [30 * (1 + rng.gauss(0, 0.05)) for _ in range(6)]
    step += [15 * (1 + rng.gauss(0, 0.05)) for _ in range(5)]
    found, _ = changepoints.detect(step, 0.05)
    assert [s.index for s in found] == [6]
    false = 0
    for _ in range(300):
        n = rng.randint(6, 13)
        flat = [30 * (1 + rng.gauss(0, 0.2)) for _ in range(n)]
        false += bool(changepoints.detect(flat, 0.05)[0])
    assert false <= 3, false


def test_series_are_keyed_by_what_they_are(tmp_path: Path) -> None:
    """Two unrelated analyses of traces are two series named by their traces, not one with an
    empty name; rows are named by function and a short path (never a venv's absolute path),
    and rows that restate a metric are not a second series of it."""
    db = tmp_path / "h.sqlite"
    for i, traces in enumerate(("a100_nccl", "v100_ns")):
        rep = copy.deepcopy(load_report(BUSY))
        rep.run.command = []
        rep.run.analyzed = [{"path": f"/traces/{traces}/rank-0.json.gz", "backend": "torch"}]
        rep.environment["recorded"] = {"rank0": {"devices": [traces.upper()]}}
        path = tmp_path / f"a{i}.json"
        save_report(rep, path)
        history.add(db, rep, path)
    found = history.groups(db)
    assert sorted(g.workload[-1] for g in found) == ["/traces/a100_nccl/rank-0.json.gz",
                                                     "/traces/v100_ns/rank-0.json.gz"]
    assert all(g.workload[:2] == ["perfstack", "analyze"] for g in found)
    mlp = load_report(ROOT / "tests/fixtures/reports/ab_mlp/base.json.gz")
    path = tmp_path / "mlp.json"
    save_report(mlp, path)
    history.add(db, mlp, path)
    group = next(g for g in history.groups(db, top_rows=50) if "mlp_base.py" in g.workload[1])
    names = [name for name, _, _ in group.row_info.values()]
    assert names and not any("/.venv/" in n or "site-packages" in n for n in names), names
    assert any(n.startswith("Linear.forward (torch/nn/modules/linear.py:") for n in names)
    restating = {r.name for rows in mlp.layers.values() for r in rows if r.attrs.get("metric")}
    assert restating and not restating & set(names)


def test_an_untracked_script_is_not_the_clean_commit(tmp_path: Path) -> None:
    """A script git does not track ran code no commit holds: the run is dirty."""
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True,
                       env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
                            "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})

    git("init", "-q")
    (tmp_path / "train.py").write_text("print(1)\n")
    git("add", "train.py")
    git("commit", "-q", "-m", "one")
    (tmp_path / "scratch.py").write_text("print(2)\n")
    tracked = history.repository_of(tmp_path, tmp_path / "train.py")
    untracked = history.repository_of(tmp_path, tmp_path / "scratch.py")
    assert tracked is not None and untracked is not None
    assert tracked["dirty"] is False and tracked["script_tracked"] is True
    assert untracked["dirty"] is True and untracked["script_tracked"] is False
    assert untracked["commit"] == tracked["commit"]


def test_the_trend_page_leads_with_the_workloads_figure() -> None:
    """trend --html: the workload's throughput is the first chart (not 17th alphabetically),
    the runs and the commit of each step are on the x axis, the set-aside runs are marked,
    and no interval says a throughput fell by more than all of it."""
    from perfstack.render.trend import render_html

    g = _group(BEFORE + AFTER, {3, 4}, step_at=7)
    g.metrics["a_wall_time"] = [1e5 / v for v in BEFORE + AFTER]
    g.metric_info["a_wall_time"] = ("s", "run", "lower")
    t = trend.analyse(g, 0.05)
    page = render_html([t])
    figures = page.split("<figure>")[1:]
    assert figures[0].count("aria-label='throughput'") == 1, figures[0][:200]
    assert "run 7 bbbbbbb" in figures[0] and "run 1 aaaaaaa" in figures[0]
    assert figures[0].count("set aside: other programs") == 2
    change = next(v for v in t.verdicts if v.series.key == "throughput").changes[-1]
    assert change.step.low >= -1.0
