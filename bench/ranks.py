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
from pathlib import Path

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


def _timed(argv: list[str], cwd: Path, watch: list[int] | None = None) -> tuple[
        float, int, int]:
    """Seconds, the peak summed PSS of the command's tree (and of ``watch``), and the peak
    of its largest process other than the command itself (a worker), sampled every 50 ms."""
    peak = worker = 0
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, worker
        while not done.is_set():
            sizes = {pid: _pss(pid) for pid in _tree([proc.pid, *(watch or [])])}
            peak = max(peak, sum(sizes.values()))
            others = [v for pid, v in sizes.items() if pid != proc.pid]
            worker = max(worker, max(others, default=sizes.get(proc.pid, 0)))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}: {err[-500:]}")
    return seconds, peak, worker


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
            analyze = [sys.executable, "-m", "perfstack", "analyze", str(job), "-q"]
            ways = {"one reader (--jobs 1)": [*analyze, "--jobs", "1", "-o", "a.json"],
                    "local pool (--jobs 2)": [*analyze, "--jobs", "2", "-o", "b.json"],
                    "Dask, 2 workers": [*analyze, "--scheduler-file", str(scheduler_file),
                                        "-o", "c.json"]}
            times: dict[str, list[float]] = {k: [] for k in ways}
            peaks: dict[str, list[int]] = {k: [] for k in ways}
            largest: dict[str, list[int]] = {k: [] for k in ways}
            for _ in range(ns.rounds):
                for name, argv in ways.items():
                    watch = [p.pid for p in procs] if name.startswith("Dask") else None
                    seconds, peak, worker = _timed(argv, folder, watch)
                    times[name].append(seconds)
                    peaks[name].append(peak)
                    largest[name].append(worker)
        finally:
            for proc in procs:
                os.killpg(proc.pid, signal.SIGTERM)
            for proc in procs:
                proc.wait(30)
    print(f"{ns.ranks} ranks of {ns.trace} ({size / 2**20:.0f} MiB of JSON), {ns.rounds} "
          "rounds, medians")
    print("  (peak: the summed proportional memory of the command and its workers, and of the "
          "Dask scheduler and workers; largest: the largest of those processes, the command's "
          "own for one reader)")
    base = statistics.median(times["one reader (--jobs 1)"])
    for name in ways:
        t = statistics.median(times[name])
        print(f"  {name:24} {t:7.2f} s  {base / t:5.2f}x one reader's speed  peak "
              f"{statistics.median(peaks[name]) / 2**20:6.0f} MiB  largest "
              f"{statistics.median(largest[name]) / 2**20:5.0f} MiB")


if __name__ == "__main__":
    main()
