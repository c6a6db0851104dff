"""Where ``perfstack analyze`` reads a job's ranks: in this process, in a local pool of
worker processes, or on a Dask cluster's workers, always through the standard
``concurrent.futures.Executor`` interface (Dask's through ``Client.get_executor``). perfstack
schedules nothing itself.

The local pool's size defaults to the CPUs this process may use, fewer when the memory
available would not hold that many readers of the largest unit at once.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import multiprocessing
import os
import signal
import stat
import sys
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from perfstack import errors
from perfstack.records import datarecord
from perfstack.run.recorded import watch

#: Dask's own setting of the scheduler a client connects to.
DASK_ADDRESS_ENV = "DASK_SCHEDULER_ADDRESS"
#: A worker's memory: its interpreter with perfstack and the readers imported, and its peak
#: per byte of trace JSON while it reads one unit (measured 1.36x on the recorded A100 trace,
#: 25.8 MB of JSON: 33 MiB over the process before it; docs/performance.md): with a margin.
WORKER_BYTES = 64 << 20
PEAK_PER_BYTE = 2.0
#: Below this much trace JSON in all, the units are read in this process unless --jobs says
#: otherwise: starting a worker (a new interpreter importing perfstack and the readers, about
#: half a second) costs more than it saves (a core reads about 86 MB of JSON a second).
POOL_FROM_BYTES = 128 << 20


@datarecord
class Plan:
    """Where the units are read, in words for the report and the progress line."""

    kind: str  # "this process", "local", "a Dask cluster"
    workers: int
    why: str | None = None  # why the local pool is smaller than the CPUs, when it is


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def memory_available() -> int | None:
    """Bytes of memory available for new work (``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def json_bytes(path: Path) -> int:
    """The size of a trace's JSON: a gzip's uncompressed size (its trailer), else the file's."""
    size = path.stat().st_size
    if path.name.endswith(".gz") and size >= 18:
        with open(path, "rb") as fh:
            fh.seek(-4, os.SEEK_END)
            return max(int.from_bytes(fh.read(4), "little"), size)
    return size


def local_workers(requested: int | None, sizes: Sequence[int]) -> Plan:
    """The local pool for units of ``sizes`` (bytes of JSON, the files read together):
    ``requested`` workers, else one per usable CPU; never more than there are units, nor
    than usable CPUs, nor than the memory available holds readers of the largest unit (a
    request past them is cut to them, and the plan says so)."""
    if requested is None and min(usable_cpus(), len(sizes)) > 1 \
            and sum(sizes) < POOL_FROM_BYTES:
        return Plan("this process", 1, f"{sum(sizes) / 2**20:.0f} MB of traces: read here, "
                    "sooner than workers start (--jobs N starts them)")
    cpus = usable_cpus()
    workers = min(requested if requested is not None else cpus, max(len(sizes), 1))
    why = None
    if requested is not None and workers < requested:
        why = f"--jobs {requested}: {workers} worker(s), one per rank to read"
    if requested is not None and workers > cpus:
        why = f"--jobs {requested}: {cpus} worker(s), one per usable CPU"
        workers = cpus
    largest = max(sizes, default=0)
    free = memory_available()
    if free is not None and largest > 0:
        fit = max(1, int(free // (WORKER_BYTES + PEAK_PER_BYTE * largest)))
        if fit < workers:
            asked = "workers" if requested is not None else "CPUs"
            why = (f"{fit} of {workers} {asked}: the memory available ({free / 2**30:.1f} GiB) "
                   f"holds {fit} reader(s) of the largest rank ({largest / 2**20:.0f} MB)")
            workers = fit
    return Plan("this process" if workers <= 1 else "local", max(1, workers), why)


def _worker_start() -> None:
    """A pool worker leaves Ctrl-C to perfstack, which cancels the work and stops it, and
    ends at a termination signal (a forked worker inherited perfstack's handlers, which would
    raise in the middle of its loop)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def dask_address(scheduler: str | None, scheduler_file: Path | None) -> str | Path | None:
    """The Dask scheduler named on the command line, else by Dask's environment variable."""
    if scheduler_file is not None:
        return scheduler_file
    return scheduler or os.environ.get(DASK_ADDRESS_ENV) or None


@contextlib.contextmanager
def executor(plan: Plan, cluster: str | Path | None) -> Iterator[tuple[Executor | None, int]]:
    """The executor that reads the units (None: read them in this process) and how many
    workers it has (a Dask cluster's, as its scheduler says now); on an error, work not
    started is cancelled and the local workers are stopped."""
    if cluster is not None:
        with _dask(cluster) as found:
            yield found
        return
    if plan.workers <= 1:
        yield None, 1
        return
    pool = local_pool(plan.workers)
    try:
        yield watch.Watched(pool, watch.pool_health()), plan.workers
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        stop_children()
        raise
    pool.shutdown(wait=True)


def start_method() -> str:
    """How the local pool's workers start: forked on Linux from a process with one thread
    (a worker starts with perfstack and the readers already imported: half a second less
    before the first rank is read, on the critical path of every pool), spawned elsewhere
    (fork is unsafe on macOS, and in a process with other threads)."""
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return "fork"
    return "spawn"


def local_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes, this process's children (Ctrl-C stops them); each
    reads what the unit given to it names, and returns only its records."""
    method = start_method()
    if method == "fork":  # a forked worker flushes what it inherited unwritten, once more
        sys.stdout.flush()
        sys.stderr.flush()
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method),
                               initializer=_worker_start)


def watched_pool(workers: int) -> Executor:
    """A local pool (``local_pool``) with its watch: a fresh one after a pool broke."""
    return watch.Watched(local_pool(workers), watch.pool_health())


def stop_children() -> None:
    """Stop this process's worker processes that are still running (after Ctrl-C)."""
    for child in multiprocessing.active_children():
        child.terminate()
    for child in multiprocessing.active_children():
        child.join(5)
        if child.is_alive():
            child.kill()


#: The most of a scheduler file read: Dask's is a few hundred bytes.
SCHEDULER_FILE_BYTES = 1 << 20


def scheduler_file_address(path: Path) -> str:
    """The scheduler's address from the file ``dask scheduler --scheduler-file`` wrote; one
    clear error for anything else (a FIFO, a huge, empty, binary or deeply nested file, JSON
    that is not an object with an ``address`` string)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        raise errors.InputNotFound(f"{path}: no such scheduler file") from None
    if not stat.S_ISREG(mode):
        raise errors.NotAReport(f"{path}: not a regular file; --scheduler-file names the file "
                                "that 'dask scheduler --scheduler-file' wrote")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(SCHEDULER_FILE_BYTES + 1)
        data = json.loads(raw) if len(raw) <= SCHEDULER_FILE_BYTES else None
    except OSError as exc:
        raise errors.InputNotFound(f"{path}: cannot be read ({exc.strerror})") from None
    except (ValueError, RecursionError):
        data = None
    address = data.get("address") if isinstance(data, dict) else None
    if not isinstance(address, str) or "://" not in address:
        raise errors.NotAReport(f"{path}: not a Dask scheduler file (a JSON object whose "
                                "'address' is like tcp://host:port)")
    return address


def connect_timeout() -> float:
    """How long to wait for the scheduler to answer: Dask's own connect timeout (its config,
    DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT; 30 s unless set). The client is given it, so a
    port that accepts and never answers is waited on no longer either."""
    try:
        config: Any = importlib.import_module("dask.config")
        from dask.utils import parse_timedelta

        return float(parse_timedelta(config.get("distributed.comm.timeouts.connect"), "s"))
    except Exception:
        return 30.0


#: Beyond the connect timeout, how long the client may take to give up by itself (at most
#: the timeout again).
GRACE_S = 5.0


def _connect(client_class: Any, address: str, timeout: float, where: str) -> Any:
    """A Dask client of the scheduler at ``address``, within ``timeout`` (and a grace): a port
    that accepts and never answers holds Dask's own client past its timeout, so it is made in
    a thread that this one waits for, interruptibly, no longer than that."""
    box: dict[str, Any] = {}

    def connect() -> None:
        try:
            box["client"] = client_class(address, timeout=timeout)
        except BaseException as exc:  # handed to the waiting thread
            box["error"] = exc

    thread = threading.Thread(target=connect, name="perfstack-dask-connect", daemon=True)
    thread.start()
    limit = timeout + min(GRACE_S, timeout)
    thread.join(limit)
    if thread.is_alive():
        raise errors.ClusterUnavailable(
            f"the Dask scheduler at {where} did not answer within {limit:g} s "
            "(Dask's connect timeout, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT, and a grace)")
    if "error" in box:
        raise box["error"]
    return box["client"]


@contextlib.contextmanager
def _dask(cluster: str | Path) -> Iterator[tuple[Executor, int]]:
    try:  # untyped: read as Any
        client_class: Any = importlib.import_module("distributed").Client
    except ImportError:
        raise errors.MissingDependency(
            "reading on a Dask cluster needs Dask's distributed package: pip install "
            "'perfstack[dask]'") from None
    where = f"the scheduler file {cluster}" if isinstance(cluster, Path) else str(cluster)
    address = scheduler_file_address(cluster) if isinstance(cluster, Path) else cluster
    # Dask's retries and warnings, and tornado's tracebacks when the scheduler goes, would
    # print over perfstack's one line (its loggers set their own levels): no logging at all
    # for the client's life (perfstack itself does not log, it prints)
    logging.disable(logging.CRITICAL)
    try:
        timeout = connect_timeout()
        try:
            # How long to wait for the scheduler is Dask's own setting (its connect timeout:
            # DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT, 30 s unless set).
            client = _connect(client_class, address, timeout, where)
        except (OSError, TimeoutError, ValueError) as exc:
            raise errors.ClusterUnavailable(
                f"the Dask scheduler at {where} cannot be reached: "
                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        try:
            yield _watched_client(client, where, timeout)
        finally:
            with contextlib.suppress(Exception):
                client.close(timeout=min(timeout, GRACE_S))
    finally:
        logging.disable(logging.NOTSET)


def _watched_client(client: Any, where: str, timeout: float) -> tuple[Executor, int]:
    """The client's executor, watched, and its worker threads (at least one, waited for
    within ``timeout``: a scheduler with none is ClusterUnavailable)."""
    workers = watch.dask_workers(client, timeout) or 0
    if not workers:
        with contextlib.suppress(Exception):
            client.wait_for_workers(1, timeout=timeout)
        workers = watch.dask_workers(client, timeout) or 0
    if not workers:
        raise errors.ClusterUnavailable(
            f"the Dask scheduler at {where} has no workers (waited {timeout:g} s, Dask's "
            "connect timeout): start some with 'dask worker'")
    return watch.Watched(client.get_executor(pure=False),
                         watch.dask_health(client, where, timeout), client), workers



