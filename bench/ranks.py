"""How fast ``perfstack analyze`` reads a job's ranks: one reader, a local pool, a Dask cluster.

    .venv/bin/python bench/ranks.py [--ranks 16[,1024,...]] [--trace a100_negq] [--rounds 3]
        [--code OTHER_CHECKOUT]

Makes a folder of N ranks from a real recorded trace (``tests/fixtures/gpu-traces``, the rank
rewritten in each copy), then reads it, alternately in each round, with ``--jobs 1``,
``--jobs 2`` and on a Dask scheduler with two single-threaded workers started here on
127.0.0.1; prints the median time of each, its ratio to one reader, and the peak memory of
the whole process tree (the command and its workers, or the Dask scheduler and workers),
summed over its processes as proportional set sizes (a page shared by a forked worker and its
parent counted once), and of its largest process, sampled every 50 ms from /proc, and the
report's size. ``--ranks 64,1024,4096 --trace mi250_rocm`` measures a job at each count (the
small trace for the big counts); ``--code CHECKOUT`` runs another checkout's perfstack, to set
a change beside what came before (its Dask workers too). While a local reader runs, the Dask
cluster is stopped (SIGSTOP), so that its idle ticking takes nothing from it. Run it alone: the
machine's other work shows.
"""

from __future__ import annotations

import argparse
import contextlib
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from timing import checkout_env, perfstack_command

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
           sampled: bool = True, env: dict[str, str] | None = None) -> Sample:
    """Run ``argv`` (which writes its report to ``out``), sampling memory every 50 ms when
    ``sampled`` (the sampler reads /proc for the whole tree: on two CPUs that is time taken
    from the workers, so the timed runs are not sampled)."""
    got = Sample()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env)
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


def _cluster(folder: Path, env: dict[str, str] | None
             ) -> tuple[list[subprocess.Popen[bytes]], Path]:
    """A Dask scheduler and two single-threaded workers on 127.0.0.1, with ``env`` (the
    workers run the same perfstack as the command: another checkout's under --code)."""
    scheduler_file = folder / "scheduler.json"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                               "127.0.0.1", "--port", str(port), "--no-dashboard",
                               "--scheduler-file", str(scheduler_file)], cwd=folder,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True, env=env)]
    while not scheduler_file.exists():
        time.sleep(0.1)
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
         str(scheduler_file), "--nworkers", "2", "--nthreads", "1", "--no-dashboard", "--host",
         "127.0.0.1"], cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, env=env))
    from distributed import Client

    with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
        client.wait_for_workers(2, timeout=60)
    return procs, scheduler_file


def _measure(job: Path, folder: Path, ranks: int, rounds: int, scheduler_file: Path,
             procs: list[subprocess.Popen[bytes]], env: dict[str, str] | None
             ) -> dict[str, tuple[list[Sample], Sample, int]]:
    """Each reader's timed runs, its sampled run and its report's size in bytes."""
    analyze = [perfstack_command(), "analyze", str(job), "-q"]
    ways = {"one reader (--jobs 1)": [*analyze, "--jobs", "1", "-o", "a.json"],
            "local pool (--jobs 2)": [*analyze, "--jobs", "2", "-o", "b.json"],
            "Dask, 2 workers": [*analyze, "--scheduler-file", str(scheduler_file),
                                "-o", "c.json"]}
    got: dict[str, list[Sample]] = {k: [] for k in ways}
    for n in range(rounds):  # each round's order reversed from the last
        for name in (list(ways) if n % 2 == 0 else list(reversed(ways))):
            with _cluster_only(name, procs):
                got[name].append(_timed(ways[name], folder, Path(ways[name][-1]),
                                        sampled=False, env=env))
    out = {}
    for name, argv in ways.items():  # memory: one more run of each, sampled
        watch = [p.pid for p in procs] if name.startswith("Dask") else None
        with _cluster_only(name, procs):
            sampled = _timed(argv, folder, Path(argv[-1]), watch, env=env)
        out[name] = (got[name], sampled, (folder / argv[-1]).stat().st_size)
    return out


@contextlib.contextmanager
def _cluster_only(name: str, procs: list[subprocess.Popen[bytes]]) -> Iterator[None]:
    """While a local reader runs, the Dask scheduler and workers are stopped (SIGSTOP to
    their process groups), then continued: idle, they still wake several times a second
    (heartbeats, their event loops), time taken from two workers on two CPUs."""
    if name.startswith("Dask"):
        yield
        return
    for proc in procs:
        os.killpg(proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGCONT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="16",
                        help="rank counts, comma-separated (64,1024,4096)")
    parser.add_argument("--trace", default="a100_negq")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--code", type=Path, metavar="CHECKOUT",
                        help="run another checkout's perfstack and plugins (its folder "
                        "first on PYTHONPATH), to set a change beside what came before")
    ns = parser.parse_args()
    links = tempfile.TemporaryDirectory() if ns.code else None
    env = checkout_env(ns.code, Path(links.name)) if ns.code and links else None
    counts = [int(c) for c in ns.ranks.split(",")]
    print(f"{ns.trace}, {ns.rounds} round(s) at each count, the readers' order reversed each "
          "round; time: median; speed: one reader's time over the reader's, within each round "
          "(min, median, max); memory: one more run of each, sampled every 50 ms"
          + (f"; the code of {ns.code}" if ns.code else ""))
    print("  peak: the summed proportional memory of the command and its workers (and of the "
          "Dask scheduler and workers); parent: the command's own; worker: the largest "
          "worker process (the reader itself when it is alone)")
    for count in counts:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            job = folder / "job"
            job.mkdir()
            size = _job(job, count, ns.trace)
            procs, scheduler_file = _cluster(folder, env)
            try:
                found = _measure(job, folder, count, ns.rounds, scheduler_file, procs, env)
            finally:
                for proc in procs:
                    os.killpg(proc.pid, signal.SIGTERM)
                for proc in procs:
                    proc.wait(30)
        print(f"{count} ranks ({size / 2**20:.0f} MiB of JSON)")
        one = found["one reader (--jobs 1)"][0]
        for name, (timed, sampled, report_bytes) in found.items():
            t = statistics.median(s.seconds for s in timed)
            # speed: one reader's time over this reader's, within each round (min/median/max)
            speed = [a.seconds / b.seconds for a, b in zip(one, timed, strict=True)]
            print(f"  {name:24} {t:7.2f} s  {min(speed):4.2f}x {statistics.median(speed):4.2f}x "
                  f"{max(speed):4.2f}x  peak {sampled.peak / 2**20:5.0f} MiB  parent "
                  f"{sampled.command / 2**20:5.0f} MiB  worker {sampled.worker / 2**20:4.0f} "
                  f"MiB  report {report_bytes / 2**20:5.1f} MiB")
        per_rank = statistics.median(s.reading for s in one) / count
        print(f"  a rank read in {per_rank * 1e3:.1f} ms (one reader); outside the reading "
              f"(start, merge, write): "
              f"{statistics.median(s.outside for s in one):.2f} s", flush=True)


if __name__ == "__main__":
    main()
