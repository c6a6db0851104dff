"""How fast ``perfstack analyze`` reads a job's ranks: one reader, a local pool, a Dask cluster.

    .venv/bin/python bench/ranks.py [--ranks 16] [--trace a100_negq] [--rounds 3]

Makes a folder of N ranks from a real recorded trace (``tests/fixtures/gpu-traces``, the rank
rewritten in each copy), then reads it, alternately in each round, with ``--jobs 1``,
``--jobs 2`` and on a Dask scheduler with two single-threaded workers started here on
127.0.0.1; prints the median time of each, its ratio to one reader, and the peak memory of
the whole process tree (the command and its workers, or the Dask scheduler and workers),
summed over its processes as proportional set sizes (a page shared by a forked worker and its
parent counted once), and of its largest process, sampled every 50 ms from /proc. Run it
alone: the machine's other work shows.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from timing import perfstack_command

ROOT = Path(__file__).resolve().parent.parent
PAGE = os.sysconf("SC_PAGE_SIZE")


def _pss(pid: int) -> int:
    """A process's proportional set size in bytes: its private pages and its share of the
    pages it shares (a forked worker shares its parent's until either writes them), so that a
    tree's sum counts every page once; its RSS where the kernel gives no smaps_rollup."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[21]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _tree(roots: list[int]) -> list[int]:
    """``roots`` and every process below them."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                parent[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    out = []
    for pid in parent:
        p = pid
        while p and p not in roots:
            p = parent.get(p, 0)
        if p:
            out.append(pid)
    return out


@dataclass
class Sample:
    """One command's run: its time, memory and what its report says of the reading."""

    seconds: float = 0.0
    peak: int = 0  # the summed PSS of the command's tree (and of the watched processes)
    command: int = 0  # the command's own peak PSS (the parent: it merges and writes)
    worker: int = 0  # the largest other process's peak (a worker); the command's when alone
    reading: float = 0.0  # the readers' seconds, summed over the ranks (the report's)
    outside: float = 0.0  # the command's seconds outside the reading (start, merge, write)


def _timed(argv: list[str], cwd: Path, out: Path, watch: list[int] | None = None,
           sampled: bool = True) -> Sample:
    """Run ``argv`` (which writes its report to ``out``), sampling memory every 50 ms when
    ``sampled`` (the sampler reads /proc for the whole tree: on two CPUs that is time taken
    from the workers, so the timed runs are not sampled)."""
    got = Sample()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            sizes = {pid: _pss(pid) for pid in _tree([proc.pid, *(watch or [])])}
            got.peak = max(got.peak, sum(sizes.values()))
            got.command = max(got.command, sizes.get(proc.pid, 0))
            # the workers only, the processes below the roots: not the command (alone before
            # a pool starts and after it ends), nor Dask's scheduler or the process holding
            # its nannies; the one reader's is its own, filled in below
            roots = {proc.pid, *(watch or [])}
            got.worker = max([got.worker, *(v for pid, v in sizes.items() if pid not in roots)])
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    if sampled:
        sampler.start()
    _, err = proc.communicate()
    got.seconds = time.perf_counter() - start
    done.set()
    if sampled:
        sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}: {err[-500:]}")
    if sampled and not got.worker:  # no worker: the command read every rank itself
        got.worker = got.command
    report = json.loads((cwd / out).read_text())
    reading = report["environment"]["reading"]
    got.reading = reading["seconds"]
    got.outside = report["run"]["duration_s"] - reading["wall_seconds"]
    return got


def _job(folder: Path, ranks: int, trace: str) -> int:
    with gzip.open(ROOT / "tests/fixtures/gpu-traces" / trace / "rank-0.json.gz", "rt") as fh:
        data = json.load(fh)
    size = 0
    for rank in range(ranks):
        data["distributedInfo"] = {**(data.get("distributedInfo") or {}), "rank": rank,
                                   "world_size": ranks}
        text = json.dumps(data)
        size += len(text)
        with gzip.open(folder / f"rank-{rank}.json.gz", "wt", compresslevel=1) as fh:
            fh.write(text)
    return size


def _cluster(folder: Path) -> tuple[list[subprocess.Popen[bytes]], Path]:
    scheduler_file = folder / "scheduler.json"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                               "127.0.0.1", "--port", str(port), "--no-dashboard",
                               "--scheduler-file", str(scheduler_file)], cwd=folder,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)]
    while not scheduler_file.exists():
        time.sleep(0.1)
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
         str(scheduler_file), "--nworkers", "2", "--nthreads", "1", "--no-dashboard", "--host",
         "127.0.0.1"], cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True))
    from distributed import Client

    with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
        client.wait_for_workers(2, timeout=60)
    return procs, scheduler_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--trace", default="a100_negq")
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        job = folder / "job"
        job.mkdir()
        size = _job(job, ns.ranks, ns.trace)
        procs, scheduler_file = _cluster(folder)
        try:
            analyze = [perfstack_command(), "analyze", str(job), "-q"]
            ways = {"one reader (--jobs 1)": [*analyze, "--jobs", "1", "-o", "a.json"],
                    "local pool (--jobs 2)": [*analyze, "--jobs", "2", "-o", "b.json"],
                    "Dask, 2 workers": [*analyze, "--scheduler-file", str(scheduler_file),
                                        "-o", "c.json"]}
            got: dict[str, list[Sample]] = {k: [] for k in ways}
            memory: dict[str, Sample] = {}
            for _ in range(ns.rounds):
                for name, argv in ways.items():
                    got[name].append(_timed(argv, folder, Path(argv[-1]), sampled=False))
            for name, argv in ways.items():  # memory: one more run of each, sampled
                watch = [p.pid for p in procs] if name.startswith("Dask") else None
                memory[name] = _timed(argv, folder, Path(argv[-1]), watch)
        finally:
            for proc in procs:
                os.killpg(proc.pid, signal.SIGTERM)
            for proc in procs:
                proc.wait(30)
    print(f"{ns.ranks} ranks of {ns.trace} ({size / 2**20:.0f} MiB of JSON), {ns.rounds} "
          "rounds, medians; memory from one more run of each, sampled")
    print("  memory: peak = the summed proportional memory of the command and its workers "
          "(and of the Dask scheduler and workers); parent = the command's own; worker = the "
          "largest worker process (the reader itself when it is alone)")

    def med(name: str, field: str) -> float:
        if field in ("peak", "command", "worker"):
            return float(getattr(memory[name], field))
        return statistics.median(getattr(s, field) for s in got[name])

    base = med("one reader (--jobs 1)", "seconds")
    for name in ways:
        t = med(name, "seconds")
        print(f"  {name:24} {t:6.2f} s  {base / t:5.2f}x  peak {med(name, 'peak') / 2**20:5.0f}"
              f" MiB  parent {med(name, 'command') / 2**20:4.0f} MiB  worker "
              f"{med(name, 'worker') / 2**20:4.0f} MiB  outside the reading "
              f"{med(name, 'outside'):5.2f} s")
    one = got["one reader (--jobs 1)"]
    per_rank = statistics.median(s.reading for s in one) / ns.ranks
    print(f"  a rank read in {per_rank:.3f} s ({size / ns.ranks / 2**20 / per_rank:.0f} MiB of "
          "JSON a second, one reader)")


if __name__ == "__main__":
    main()
