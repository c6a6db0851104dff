"""The workload's child processes (DataLoader workers, a multiprocessing pool): their CPU time
is counted apart, py-spy follows them when asked and lists their functions apart, never as
shares of the workload's wall time, and the findings say where the work went (or that it
went unsampled) instead of advising workers to a workload that already has them."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from perfstack.analysis.views.drilldown import drill_down
from perfstack.plugin.load import load_plugins
from perfstack.report import Finding, Layer, Report
from perfstack.report.files import load_report, save_report
from plugins.pyspy import processes
from tests.conftest import ROOT, WORKLOADS, Result, backend, perfstack_in

#: A real run (tests/fixtures/reports/README.md has its command): two forked workers burn
#: 4 x 0.5 s of CPU time while the main process waits for them, after a third child burnt
#: 0.3 s before the first step.
RECORDED = ROOT / "tests/fixtures/reports/rules/children.json.gz"


def test_a_pool_s_workers_are_sampled_and_kept_apart(perfstack: Callable[..., Result]) -> None:
    """A live run with --pyspy-subprocesses: the workers' functions come keyed ``child:``
    with how many processes they sum, the workload's own rows hold none of their work, no
    row is named by a pid, and the workers' CPU time (counted by CPU time, not wall time)
    is the children's metric."""
    result = perfstack("run", "--plugins", "pyspy,resources", "--pyspy-subprocesses",
                       "--repeat", "1", "--warmup", "0", "-q",
                       str(WORKLOADS / "pool_children.py"))
    assert result.code == 0, result.stderr
    report = result.report()
    assert backend(report, "pyspy")["status"] == "ok"
    python = report["layers"]["python"]
    crunch = [r for r in python if r["attrs"].get("function") == "crunch"]
    assert [r["key"].split(" (")[0] for r in crunch] == ["child:crunch"], crunch
    # the two workers and the child before the first step
    assert crunch[0]["attrs"]["process"] == "child" and crunch[0]["attrs"]["processes"] == 3
    assert crunch[0]["name"].startswith("[child processes] crunch (")
    threads = [r["key"] for r in python if r["attrs"].get("kind") == "thread"]
    assert "thread:MainThread" in threads and "thread:child:MainThread" in threads, threads
    everything = [r["key"] for layer in report["layers"].values() for r in layer]
    assert not [k for k in everything if "process " in k], everything
    metrics = {m["name"]: m["value"] for m in report["metrics"]}
    # 4 tasks of 0.5 s of CPU each from the first step on; 0.3 s in a child before it
    saved = json.loads((result.cwd / ".perfstack/runs/latest/baseline-1/workload-steps.json")
                       .read_text())
    at_first = saved["children_cpu_at_first_step_s"]
    assert saved["children_cpu_s"] - at_first >= 1.9, saved
    assert 0.25 <= at_first < 0.6, saved
    assert metrics["child_cpu_time"] == pytest.approx(saved["children_cpu_s"])
    assert metrics["child_cpus_in_steps"] == pytest.approx(
        (saved["children_cpu_s"] - at_first) / saved["first_step_to_end_s"])
    found = {f["rule"]: f for f in report["findings"]}
    assert found["python.child-processes"]["title"].startswith(
        "the workload's 3 child processes ran "), found
    assert "python.children-unsampled" not in found
    shown = perfstack_in(result.cwd, "show", env={"COLUMNS": "80"}).stdout
    block = shown[shown.index("\nFindings"):shown.index("\nWhere the time")]
    for finding in re.split(r"\n(?=  \[)", block)[1:]:  # at most 7 lines each, as any
        assert len(finding.strip("\n").splitlines()) <= 7, finding
    # The main thread waits for its workers: the advice is where they spend it, not workers.
    waiting = found["time.waiting"]
    assert any("child processes used" in e for e in waiting["evidence"]), waiting
    assert "waiting for its child processes" in waiting["action"]


def test_the_tree_labels_child_functions_and_gives_them_no_share_of_wall() -> None:
    report = load_report(RECORDED)
    nodes, _ = drill_down(report, top=20)
    child = [n for n in nodes if n.key.startswith("child:")]
    assert child and all(n.label.startswith("[3 child processes] ") for n in child), child
    assert all(n.share is None for n in child)
    assert any(n.label.startswith("[3 child processes] crunch") for n in child)
    # Their libraries fold apart from the workload's own.
    assert any(n.key == "child:library:stdlib" for n in nodes), [n.key for n in nodes]
    assert all(n.share is not None for n in nodes if n.key.startswith("library:"))


def test_unsampled_children_are_said_with_their_cpu_time(tmp_path: Path) -> None:
    """The same run as if py-spy had followed the workload's process only: the children's CPU
    time (97% of all) is what it did not see, and the finding says how to sample it; below
    0.2 s of CPU, or 10% of it, nothing is said."""
    report = load_report(RECORDED)
    report.layers[Layer.PYTHON] = [r for r in report.layers[Layer.PYTHON]
                                   if r.attrs.get("process") != "child"]
    found = {f.rule: f for f in load_plugins().findings(report)}
    unsampled = found["python.children-unsampled"]
    assert "which py-spy did not sample" in unsampled.title, unsampled.title
    assert "--pyspy-subprocesses" in unsampled.action
    assert "python.child-processes" not in found
    # On the first screen at 80 columns it takes no more lines than any finding may (7).
    report.findings = list(found.values())
    save_report(report, tmp_path / "unsampled.json")
    shown = perfstack_in(tmp_path, "show", "unsampled.json", env={"COLUMNS": "80"})
    assert shown.code == 0, shown.stderr
    block = shown.stdout[shown.stdout.index("\nFindings"):shown.stdout.index("\nWhere the time")]
    lines = next(f for f in re.split(r"\n(?=  \[)", block) if "py-spy did not sample" in f)
    assert len(lines.strip("\n").splitlines()) <= 7, lines
    for name, value in (("child_cpu_time", 0.15), ("cpu_user_time", 30.0)):
        changed = load_report(RECORDED)
        changed.layers[Layer.PYTHON] = report.layers[Layer.PYTHON]
        changed.metrics = [dataclasses.replace(m, value=value) if m.name == name else m
                           for m in changed.metrics]
        rules = {f.rule for f in load_plugins().findings(changed)}
        assert "python.children-unsampled" not in rules, (name, value)


def test_profiles_split_by_process() -> None:
    """py-spy names a profile by its process when it follows children: the workload's pid
    where it was sampled, else the lowest; one process only, nothing to split."""
    def named(pid: int, tid: int) -> dict[str, object]:
        return {"name": f'Process {pid} Thread {tid} "MainThread"', "samples": []}

    profiles = [named(700, 700), named(701, 701), named(702, 702), named(700, 705)]
    own, children, n = processes.split(profiles, 700)
    assert [p["name"] for p in own] == [profiles[0]["name"], profiles[3]["name"]]
    assert len(children) == 2 and n == 2
    assert processes.split(profiles, None)[2] == 2  # the lowest pid is the workload's
    single = [{"name": 'Thread 700 "MainThread"', "samples": []}]
    assert processes.split(single, 700) == (single, [], 0)


def test_torch_threads_and_busy_workers_past_the_cpus_are_a_finding() -> None:
    """A recorded run of two DataLoader workers (tests/workloads/loader_workers.py): from the
    first step to the end they kept about 1.2 CPUs busy while torch kept 2 intra-op threads on
    2 CPUs. Children at 0.6 CPUs still do not fit (2.6 > 2 + the 0.5 margin); under half a CPU
    they do not count; with one torch thread there is no pool to wait (measured with
    OMP_NUM_THREADS=1: the step's ops 48x faster, the step 2x); a compiler run before the
    first step (torch.compile) left 0."""
    path = ROOT / "tests/fixtures/reports/rules/loader_workers.json.gz"

    def rules(children: float | None = None, threads: int | None = None,
              ranks: int = 1) -> dict[str, Finding]:
        report = load_report(path)
        if children is not None:
            report.metrics = [dataclasses.replace(m, value=children)
                              if m.name == "child_cpus_in_steps" else m
                              for m in report.metrics]
        if threads is not None:
            report.environment["torch"]["intra_op_threads"] = threads
        if ranks > 1:
            step = next(m for m in report.metrics if m.name == "step_time")
            report.metrics += [dataclasses.replace(step, name=f"step_time[rank{r}]")
                               for r in range(ranks)]
        return {f.rule: f for f in load_plugins().findings(report)}

    compete = rules()["threads.children-compete"]
    assert compete.title == ("torch's 2 threads and the workload's child processes compete "
                             "for 2 CPUs")
    assert "about 1.2 CPUs kept busy by its child processes" in compete.evidence[0], compete
    assert "torch.set_num_threads(1)" in compete.action
    assert "threads.children-compete" in rules(children=0.6)
    assert "threads.children-compete" not in rules(children=0.45)
    assert "threads.children-compete" not in rules(threads=1)
    assert "threads.children-compete" not in rules(children=0.0)
    # Two ranks on the machine, each with torch's 2 threads (their children summed): 4.
    ranked = rules(ranks=2)["threads.children-compete"]
    assert ranked.title.startswith("torch's 4 threads") and " x 2 ranks + " in ranked.evidence[0]


def test_roofline_verdicts_on_contended_cpus_say_so_first() -> None:
    """The same workload with torch (a recorded run): its ops' verdicts ('ran at 0.07% of what
    this machine can reach') come first with the contention that slowed them; without the
    children's figure there is no contention finding and nothing is added."""
    from perfstack.analysis.rules import contention, roofline

    def findings_of(report: Report) -> list[Finding]:
        report.findings = []
        _, found = roofline.annotate(report)
        report.findings = [*found, *load_plugins().findings(report)]
        contention.qualify(report)
        return report.findings

    path = ROOT / "tests/fixtures/reports/rules/loader_workers_torch.json.gz"
    found = findings_of(load_report(path))
    roof = [f for f in found if f.rule.startswith("roofline.")]
    assert roof and "threads.children-compete" in {f.rule for f in found}, found
    assert all(f.evidence[0] == "measured on contended CPUs (threads.children-compete): the "
               "ops' times include waiting for a CPU" for f in roof), roof
    quiet = load_report(path)
    quiet.metrics = [m for m in quiet.metrics if m.name != "child_cpus_in_steps"]
    assert not any(e.startswith("measured on contended")
                   for f in findings_of(quiet) for e in f.evidence)
