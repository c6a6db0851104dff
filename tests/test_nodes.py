"""Which node of a multi-node job a run is, from torchrun's options or SLURM's environment,
and the --job-dir that places each node's report (the live two-node job is in
tests/test_distributed.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from perfstack.run.nodes import first_host, node_rank, slurm_rendezvous
from tests.conftest import WORKLOADS, Result, assert_one_line_error, perfstack_env


@pytest.mark.parametrize(("nodelist", "first"), [
    ("gpu[03-05,9],cpu1", "gpu03"), ("host-a,host-b", "host-a"), ("node7", "node7"),
    ("rack[1-2]-n[08-09]", "rack1-n08"), ("a[10,2],b[1-3]", "a10"), ("127.0.0.[1-2]", "127.0.0.1"),
])
def test_the_first_host_of_a_slurm_node_list(nodelist: str, first: str) -> None:
    assert first_host(nodelist) == first


def test_a_slurm_job_of_several_nodes_gives_torchruns_static_rendezvous() -> None:
    env = {"SLURM_JOB_ID": "12", "SLURM_NNODES": "4", "SLURM_NODEID": "2",
           "SLURM_JOB_NODELIST": "gpu[03-06]"}
    assert slurm_rendezvous(env) == ["--nnodes", "4", "--node-rank", "2", "--master-addr",
                                     "gpu03", "--master-port", "29500"]
    own = {**env, "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "31000"}
    assert slurm_rendezvous(own) == ["--nnodes", "4", "--node-rank", "2", "--master-addr",
                                     "10.0.0.1", "--master-port", "31000"]
    assert slurm_rendezvous({**env, "SLURM_NNODES": "1"}) is None  # one node: standalone
    assert slurm_rendezvous({k: v for k, v in env.items() if k != "SLURM_JOB_ID"}) is None
    assert slurm_rendezvous({}) is None


def test_the_node_rank_comes_from_torchrun_then_the_launchers() -> None:
    assert node_rank(["--nnodes", "2", "--node-rank", "1"], {"SLURM_NODEID": "0"}) == 1
    assert node_rank(["--nnodes=2", "--node_rank=3"], {}) == 3
    assert node_rank(["--nnodes", "2"], {"SLURM_NODEID": "1"}) == 1
    assert node_rank(["--nnodes", "2"], {"NODE_RANK": "5"}) == 5
    assert node_rank(["--standalone"], {}) == 0
    assert node_rank([], {}) == 0
    assert node_rank(["--nnodes", "2", "--rdzv-backend", "c10d"], {}) is None


def test_job_dir_is_checked_before_anything_runs(perfstack: Callable[..., Result],
                                                 tmp_path: Path) -> None:
    script = str(WORKLOADS / "busy.py")
    job = str(tmp_path / "job")
    assert_one_line_error(perfstack("run", "--job-dir", job, script), 2)  # no torchrun
    assert_one_line_error(perfstack("run", "--nproc-per-node", "1", "--job-dir", job, "-o",
                                    "r.json", script), 2)
    unknown = perfstack("run", "--nproc-per-node", "1", "--job-dir", job, "--torchrun-args",
                        "--nnodes 2 --rdzv-backend c10d --rdzv-endpoint h:1", script)
    assert_one_line_error(unknown, 2)
    assert "which node of the job is this?" in unknown.stderr
    (tmp_path / "job" / "node0" / "run").mkdir(parents=True)
    again = perfstack("run", "--nproc-per-node", "1", "--job-dir", job, script)
    assert "node 0 of a job already wrote there" in again.stderr
    assert_one_line_error(again, again.code)
    assert again.code not in (0, 1, 2)
    assert not (tmp_path / ".perfstack").exists()  # nothing ran


def _node_report(folder: Path, rank: int, steps: dict[str, int] | None,
                 job: str | None = None, started: str | None = None) -> Path:
    """A node's report of one rank of train.py whose runs measured ``steps``."""
    from perfstack.report import Better, Metric, Report, RunInfo
    from perfstack.report.files import save_report

    folder.mkdir(parents=True)
    report = Report(run=RunInfo(command=["python", "train.py"], cwd=str(folder),
                                started=started or f"2026-11-24T10:00:0{rank}",
                                duration_s=1.0, perfstack_version="0", repeat=1, warmup=0,
                                timeout_s=None, complete=True, steps=steps),
                    environment={"distributed": {"profiled_ranks": [rank], "node": rank,
                                                 "job": {"slurm": job}}} if job else {})
    report.metrics.append(Metric(f"step_time[rank{rank}]", 0.1, "s", "framework", "baseline",
                                 Better.LOWER, samples=[0.1] * 4, samples_of="steps"))
    save_report(report, folder / "report.json")
    return folder / "report.json"


def test_nodes_that_measured_different_steps_are_not_joined(perfstack: Callable[..., Result],
                                                            tmp_path: Path) -> None:
    """A job's step times are matched across ranks by step number: node reports whose runs
    measured other steps (--warmup-steps 2 --steps 4 on one node, --warmup-steps 3 on the
    other, or no --steps) are refused in one line that says which steps each measured, and
    joined with --force; the same steps join."""
    _node_report(tmp_path / "same" / "node0", 0, {"warmup": 2, "measured": 4})
    _node_report(tmp_path / "same" / "node1", 1, {"warmup": 2, "measured": 4})
    joined = perfstack("merge", str(tmp_path / "same"), "-o", "same.json", "-q")
    assert joined.code == 0, joined.stderr
    _node_report(tmp_path / "other" / "node0", 0, {"warmup": 2, "measured": 4})
    _node_report(tmp_path / "other" / "node1", 1, {"warmup": 3, "measured": 4})
    _node_report(tmp_path / "other" / "node2", 2, None)
    refused = perfstack("merge", str(tmp_path / "other"), "-o", "other.json", "-q")
    assert_one_line_error(refused, 2)
    assert ("measured different steps (steps 3-6 (--warmup-steps 2 --steps 4) vs steps 4-7 "
            "(--warmup-steps 3 --steps 4))") in refused.stderr
    assert not (tmp_path / "other.json").exists()
    forced = perfstack("merge", str(tmp_path / "other"), "-o", "other.json", "-q", "--force")
    assert forced.code == 0, forced.stderr
    only = perfstack("merge", str(tmp_path / "other" / "node0" / "report.json"),
                     str(tmp_path / "other" / "node2" / "report.json"), "-o", "x.json", "-q")
    assert "every step, no --steps" in only.stderr and only.code == 2



def test_node_0_of_two_jobs_is_not_a_job(perfstack: Callable[..., Result],
                                        tmp_path: Path) -> None:
    """Node 0 of two runs of one workload were joined as nodes 0 and 1 without a word: two
    reports holding the same global rank are refused, as are nodes of two SLURM jobs; the
    two nodes of one job join."""
    _node_report(tmp_path / "a" / "node0", 0, None, started="2026-11-24T10:00:00")
    _node_report(tmp_path / "b" / "node0", 0, None, started="2026-11-24T11:00:00")
    twice = perfstack("merge", str(tmp_path / "a" / "node0" / "report.json"),
                      str(tmp_path / "b" / "node0" / "report.json"), "-o", "m.json", "-q")
    assert_one_line_error(twice, 2)
    assert "both hold rank 0: they are not two nodes of one job" in twice.stderr
    _node_report(tmp_path / "c" / "node0", 0, None, job="41")
    _node_report(tmp_path / "c" / "node1", 1, None, job="42")
    other = perfstack("merge", str(tmp_path / "c"), "-o", "m.json", "-q")
    assert_one_line_error(other, 2)
    assert "are nodes of different jobs (slurm 41 vs 42)" in other.stderr
    _node_report(tmp_path / "d" / "node0", 0, None, job="41")
    _node_report(tmp_path / "d" / "node1", 1, None, job="41")
    assert perfstack("merge", str(tmp_path / "d"), "-o", "m.json", "-q").code == 0
    # what a hand-edited report says there is read as what it is, never an internal error
    hostile = tmp_path / "d" / "node1" / "report.json"
    data = json.loads(hostile.read_text())
    data["environment"]["distributed"] = {"job": "41", "profiled_ranks": 5}
    hostile.write_text(json.dumps(data))
    assert perfstack("merge", str(tmp_path / "d"), "-o", "m2.json", "-q").code == 0


def test_a_job_is_named_by_slurm_or_its_rendezvous() -> None:
    from perfstack.run.nodes import job_identity

    assert job_identity([], {"SLURM_JOB_ID": "7"}) == {"slurm": "7"}
    assert job_identity(["--rdzv-id", "x1", "--rdzv-endpoint", "h:5"], {}) == {
        "rendezvous": "x1@h:5"}
    assert job_identity(["--nnodes", "2", "--master-addr", "10.0.0.1"],
                        {"SLURM_JOB_ID": "7"}) == {"slurm": "7", "rendezvous": "10.0.0.1:29500"}
    assert job_identity(["--standalone"], {}) == {}


_CLAIM = """
import os, sys, time
from pathlib import Path
from perfstack.errors import OutputError
from perfstack.runfolder.claim import claim_empty_folder
go = Path(sys.argv[2])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.0005)
try:
    claim_empty_folder(Path(sys.argv[1]), "taken")
except OutputError:
    print("refused")
else:
    print("won")
    time.sleep(0.5)  # held while the others try
"""


def test_one_of_several_sessions_started_together_takes_a_folder(tmp_path: Path) -> None:
    """Two sessions of one node given one --job-dir (or one --out-dir), started together:
    the check-then-write let both pass and one report replaced the other. Six processes
    released at once: exactly one takes the folder, its hold ends with it, and once the
    folder holds a report a later session is refused too."""
    folder, go = tmp_path / "job" / "node0", tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _CLAIM, str(folder), str(go)],
                              stdout=subprocess.PIPE, text=True, env=perfstack_env())
             for _ in range(6)]
    for proc in procs:  # every one started and waiting
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    go.touch()
    verdicts = sorted(proc.communicate(timeout=60)[0].strip() for proc in procs)
    assert verdicts == ["refused"] * 5 + ["won"], verdicts
    assert [p.name for p in folder.iterdir()] == []  # the hold ended with its process
    (folder / "report.json").write_text("{}")
    later = subprocess.run([sys.executable, "-c", _CLAIM, str(folder), str(go)],
                           capture_output=True, text=True, env=perfstack_env(), timeout=60)
    assert later.stdout.split() == ["ready", "refused"]


def test_a_killed_session_s_hold_on_a_folder_goes_with_it(tmp_path: Path) -> None:
    """A session killed outright (SIGKILL) cannot remove its claim: the lock behind it goes
    with the process, so the folder is free again when nothing else was written there."""
    folder = tmp_path / "out"
    held = subprocess.Popen([sys.executable, "-c", _CLAIM.replace("time.sleep(0.5)",
                                                                  "time.sleep(60)"),
                             str(folder), str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            env=perfstack_env())
    assert held.stdout is not None and held.stdout.readline().strip() == "ready"
    assert held.stdout.readline().strip() == "won"
    again = subprocess.run([sys.executable, "-c", _CLAIM, str(folder), str(tmp_path)],
                           capture_output=True, text=True, env=perfstack_env(), timeout=60)
    assert again.stdout.split() == ["ready", "refused"]  # held
    held.kill()
    held.wait(10)
    assert (folder / ".perfstack-writing").exists()  # left behind, but held by nobody
    again = subprocess.run([sys.executable, "-c", _CLAIM, str(folder), str(tmp_path)],
                           capture_output=True, text=True, env=perfstack_env(), timeout=60)
    assert again.stdout.split() == ["ready", "won"]
