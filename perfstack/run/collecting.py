"""A backend's collect step: called with a time limit (a stuck plugin cannot hold a run), once
per selected rank for per-rank backends, its records checked, and what it gave filed on the
backend's result."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfstack.plugin.backend import Backend, Collected, Outcome, RunContext
from perfstack.plugin.calls import call
from perfstack.records import replace
from perfstack.report import BackendResult, Status
from perfstack.run import assembly
from perfstack.runfolder import ranks, rundir


class CollectTimeout(Exception):
    """A backend's collect() did not return in time."""


def call_with_timeout(func: Callable[[], Collected], timeout_s: float | None) -> Collected:
    """Return ``func()``, or raise CollectTimeout when it takes longer than ``timeout_s``.

    The call runs in a daemon thread: a plugin stuck in its collect step cannot be killed from
    Python, but it no longer holds the session; the thread is abandoned and dies with the
    process. KeyboardInterrupt still reaches the caller while it waits.
    """
    if timeout_s is None:
        return func()
    import threading

    box: dict[str, Any] = {}
    finished = threading.Event()

    def target() -> None:
        try:
            box["result"] = func()
        except Abandoned:  # nobody waits for it any more
            return
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc
        finally:
            finished.set()

    thread = threading.Thread(target=target, name="perfstack-collect", daemon=True)
    try:
        thread.start()
        thread.join(timeout_s)
    except KeyboardInterrupt:  # Ctrl-C, TERM, HUP: the collect is not wanted any more
        _stop(thread, finished)
        raise
    if not finished.is_set():
        _stop(thread, finished)
        raise CollectTimeout(f"collect() did not finish within {timeout_s:g} s (--collect-"
                             "timeout); it was abandoned and its results are missing")
    if "error" in box:
        raise box["error"]
    result: Collected = box["result"]
    return result


class Abandoned(BaseException):
    """Raised inside a collect that is not wanted any more (a timeout, a signal): a
    BaseException, so that the plugin's own ``except Exception`` lets it through."""


def _stop(thread: Any, finished: Any) -> None:
    """Raise ``Abandoned`` in a collect's thread, at its next Python instruction: an abandoned
    collect reading on (a reader of a big capture, in C between records) held the GIL and
    slowed the partial report it left to be written (8 s where 0.2 would do)."""
    import ctypes

    # (not is_alive(): a join a signal interrupted marks a running thread stopped, Python
    # 3.11's threading; ``finished``: its ident may be another thread's once it has ended)
    if thread.ident is not None and not finished.is_set():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                   ctypes.py_object(Abandoned))


def collect_ranks(backend: Backend, ctx: RunContext, outcome: Outcome | None,
                  nproc: int | None, ranks_spec: str, per_rank: bool = True) -> Collected:
    """Collect once, or once per selected rank (relabelled) for per-rank backends."""
    if outcome is None or not nproc or not per_rank:
        return backend.collect(ctx, outcome)
    run = rundir.RunFolder(outcome.artifact_dir)
    chosen = ranks.among(ranks_spec, run.ranks())
    merged = Collected()
    if not chosen:
        merged.notes.append(f"no rank named by --ranks {ranks_spec} ran on this "
                            "node (--ranks takes global ranks, or all)")
    for rank in chosen:
        where = run.rank(rank)
        workload = where.outcome()
        part = backend.collect(replace(ctx, artifact_dir=where.path), Outcome(
            outcome.record, where.path, workload.pid, workload.start_ns, workload.steps))
        assembly.merge_rank(merged, part, rank, prefix=len(chosen) > 1)
    if chosen:
        merged.notes.append(f"ranks {', '.join(map(str, chosen))} of "
                            f"{nproc} on this node profiled (--ranks)")
    return merged


def collect(result: BackendResult, backend: Backend, ctx: RunContext, outcome: Outcome | None,
            *, nproc: int | None, ranks_spec: str, per_rank: bool, timeout_s: float | None,
            errors: list[str], report_dir: Path) -> Collected | None:
    """Run the backend's collect step and file it on ``result`` (status, notes, artifacts
    relative to ``report_dir``, or the failure with every error); return what it collected
    when it is kept."""
    kept: Collected | None = None

    def checked() -> tuple[Collected, list[str]]:  # what the backend gave, checked
        collected = call_with_timeout(
            lambda: collect_ranks(backend, ctx, outcome, nproc, ranks_spec, per_rank),
            timeout_s)
        return collected, assembly.malformed(collected)

    called = call(checked, "collect")
    if isinstance(called.exception, CollectTimeout):
        errors = [*errors, str(called.exception)]
    elif called.value is None:
        errors = [*errors, called.failure("collect()")]
    else:
        collected, problems = called.value
        result.collect_s = called.duration_s
        if problems:
            errors = [*errors, "malformed records: " + "; ".join(problems[:5])]
        else:
            kept = collected
            result.notes.extend(collected.notes)
            if result.status is Status.OK and collected.empty:
                result.status, result.reason = Status.EMPTY, collected.empty
            elif result.status is Status.OK and collected.partial:
                result.status, result.reason = Status.PARTIAL, collected.partial
            else:  # a crashed or stopped run keeps its status; what it lacked is a note
                result.notes.extend(n for n in (collected.empty, collected.partial) if n)
            result.artifacts = {k: os.path.relpath(p, report_dir)
                                for k, p in collected.artifacts.items()}
    if errors:
        result.status = Status.FAILED
        result.reason = errors[-1].strip().splitlines()[-1][:300]
        result.traceback = "\n".join(errors)
    return kept
