"""``perfstack analyze``: a report from profiles recorded elsewhere, with nothing run.

A user brings the files a profiler wrote on another machine or a cluster job (one file, or a
folder of per-rank files from several nodes); each backend says which files it recognizes and
reads them back (``Backend.recognizes`` and ``Backend.analyze``). The records go through the
same schema, rank merging, cross-rank figures and finding rules as a ``perfstack run``, so
every renderer and ``perfstack diff`` work on the result. The report says it was analysed
from files, and which (``run.analyzed``).
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

import perfstack
from perfstack import errors
from perfstack.analysis.job.distributed import rank_figures
from perfstack.plugin.backend import Backend, Collected
from perfstack.plugin.calls import call
from perfstack.plugin.manager import BackendEntry, Plugins
from perfstack.report import BackendResult, Finding, Metric, Report, RunInfo, Status
from perfstack.report.job.rankcolumns import BIG_JOB
from perfstack.run import assembly
from perfstack.run.ceilingstep import recorded_ceilings
from perfstack.run.recorded import executors
from perfstack.run.recorded.baselinesteps import baseline_steps
from perfstack.run.recorded.fold import JobFold, declared_primary
from perfstack.run.recorded.reduce import Progress, Unit, UnitResult, reduce_units, unit_bytes

#: The rule of the finding that names files left out (and the CLI's exit 9 for it).
LEFT_OUT_RULE = "analyze.files-left-out"
#: The rule of the finding that names the ranks that could not be read (exit 9 too).
UNREAD_RULE = "analyze.ranks-unread"


def expand(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """Return (files named, files found in named folders), each sorted, hidden files skipped;
    raise InputNotFound for a path that does not exist."""
    named: list[Path] = []
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [Path(root) / f for f in sorted(files) if not f.startswith(".")]
        elif path.is_file():
            named.append(path)
        elif path.exists():
            _refuse_special(path)
        else:
            raise errors.InputNotFound(f"{path}: no such file or folder")
    for path in found:
        if path.is_symlink() and not path.exists():
            continue  # a dangling link or a loop: no reader claims it (said if named like one)
        _refuse_special(path)
    seen: set[object] = set()
    return _once(named, seen), _once(found, seen)


def _once(paths: list[Path], seen: set[object]) -> list[Path]:
    """``paths`` without a file already in ``seen`` (by device and inode: one file named
    twice, by its folder and by name, or through a link, is one rank, not two cycles)."""
    out = []
    for path in paths:
        try:
            info = path.stat()
            key: object = (info.st_dev, info.st_ino)
        except OSError:
            key = str(path.absolute())
        if key not in seen:
            seen.add(key)
            out.append(path)
    return out


def _refuse_special(path: Path) -> None:
    """Raise NotAReport for a FIFO, a device or a socket, before anything opens it (a FIFO
    nobody writes to would block the read for ever)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise errors.InputNotFound(f"{path}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise errors.NotAReport(f"{path}: not a regular file (a FIFO, a device or a socket); "
                                "analyze reads recorded files")


def claim(files: Sequence[Path], backends: dict[str, BackendEntry]) -> tuple[
        dict[str, list[Path]], list[Path]]:
    """Return the files each backend recognizes (the first backend, by name, that does) and
    the files none does."""
    claimed: dict[str, list[Path]] = {}
    unclaimed: list[Path] = []
    # a backend that reads no recorded files (the base class's answer) is not asked of
    # each: a job's thousands of files, a dozen backends
    readers = [(name, entry) for name, entry in sorted(backends.items())
               if type(entry.backend).recognizes is not Backend.recognizes]
    for path in files:
        for name, entry in readers:
            # a plugin's bug must not hide the file from the others
            if call(lambda: entry.backend.recognizes(path), "recognizes").value:  # noqa: B023
                claimed.setdefault(name, []).append(path)
                break
        else:
            unclaimed.append(path)
    return claimed, unclaimed


def _shape(path: Path) -> str:
    """A file's name with every number as '#': one job's per-rank files share a shape."""
    return re.sub(r"\d+", "#", path.name)


def left_out(claimed: dict[str, list[Path]], unclaimed: Sequence[Path]) -> list[Path]:
    """The files found that no backend read although they are named like files that were
    read (``rank-3.json.gz`` beside ``rank-0.json.gz``): a rank that was cut short, damaged
    or is not what its name says, which a report of the others must not pass over."""
    shapes = {_shape(p) for files in claimed.values() for p in files}
    return [p for p in unclaimed if _shape(p) in shapes]


def _left_out_finding(missed: Sequence[Path]) -> Finding:
    shown = ", ".join(str(p) for p in missed[:3]) + (
        f" and {len(missed) - 3} more" if len(missed) > 3 else "")
    return Finding(
        rule=LEFT_OUT_RULE, severity="critical", layer="run", source="perfstack",
        title=f"{len(missed)} file{'s' * (len(missed) != 1)} named like the job's traces "
        f"{'were' if len(missed) != 1 else 'was'} not read: this report leaves "
        f"{'them' if len(missed) != 1 else 'it'} out",
        evidence=[f"not read: {shown} (no installed backend recognizes what "
                  f"{'they hold' if len(missed) != 1 else 'it holds'}: cut short, damaged, "
                  "or another kind of file)"],
        action="Check those files (a rank's trace may have been cut off when its job ended) "
        "or name only the files to read; every figure across ranks here is of the others.")


def _unread_finding(failed: Sequence[UnitResult], of: int) -> Finding:
    shown = [f"{', '.join(p.name for p in r.unit.files[:2])}: {r.error}" for r in failed[:3]]
    if len(failed) > 3:
        shown.append(f"and {len(failed) - 3} more")
    return Finding(
        rule=UNREAD_RULE, severity="critical", layer="run", source="perfstack",
        title=f"{len(failed)} of {of} ranks or processes could not be read: this report is of "
        "the others",
        evidence=shown,
        action="Check those files (cut short when the job ended, or damaged in the copy) and "
        "analyse again; every figure across ranks here leaves them out.")


def unit_sized(unit: Unit) -> Unit:
    """``unit`` with its JSON's size (measured once: the pool's size and its batches are
    decided from it)."""
    return unit._replace(size=unit_bytes(unit))


def _units(claimed: dict[str, list[Path]], backends: dict[str, BackendEntry],
           results: list[BackendResult]) -> list[Unit]:
    """Each backend's files split into the units read independently (one per rank)."""
    units: list[Unit] = []
    for name, files in claimed.items():
        entry = backends[name]
        split = call(lambda: entry.backend.analysis_units(files), "analysis_units")  # noqa: B023
        if isinstance(split.exception, ValueError):
            raise errors.NotAReport(split.said()) from None
        if not split.ok:  # a plugin's bug: its files are not read
            results.append(assembly.result_of(
                entry, Status.FAILED,
                reason=f"splitting the files into ranks failed: {split.exception}"[:300],
                traceback=split.error))
            continue
        units += [unit_sized(Unit(name, tuple(unit))) for unit in split.value or () if unit]
    return units


# long: `perfstack analyze` in order: find, claim, split, read, reduce, assemble
def analyze(paths: Sequence[Path], plugins: Plugins, cwd: Path | None = None,
            jobs: int | None = None, cluster: str | Path | None = None,
            progress: Progress | None = None,
            expanded: tuple[list[Path], list[Path]] | None = None) -> Report:
    """Build a report from recorded files, each rank read by a worker (``jobs`` local
    processes, or the Dask cluster at ``cluster``); raise NotAReport when no backend reads
    them, or when no rank could be read. ``expanded``: what ``expand(paths)`` returned, where
    the caller has it already."""
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    begin = time.perf_counter()
    backends, _ = plugins.backends()
    named, found = expanded if expanded is not None else expand(paths)
    claimed, unclaimed = claim([*named, *found], backends)
    missed = left_out(claimed, unclaimed)
    stray = [p for p in unclaimed if p in named]
    if stray:
        raise errors.NotAReport(
            f"{stray[0]}: no installed backend reads this kind of file ('perfstack plugins' "
            "lists the backends)")
    if not claimed:
        raise errors.NotAReport(
            f"{', '.join(str(p) for p in paths)}: no file here that an installed backend reads")
    results: list[BackendResult] = []
    units = _units(claimed, backends, results)
    if cluster is not None:  # Dask's workers run in folders of their own: absolute paths
        units = [u._replace(files=tuple(p.absolute() for p in u.files)) for u in units]
    plan = (executors.local_workers(jobs, [unit_bytes(u) for u in units]) if cluster is None
            else executors.Plan("a Dask cluster", 0))
    if plan.workers > 1 and cluster is None and executors.start_method() == "fork":
        for name in {u.backend for u in units}:  # (loaded once here, not in each worker)
            call(backends[name].backend.load_reader, "load_reader")
    declared = declared_primary(backends)
    big = len(units) >= BIG_JOB  # (known before reading: the same wherever ranks are read)
    fold = JobFold(declared, big)
    with executors.executor(plan, cluster) as (ex, workers):
        reduced = reduce_units(units, {n: e.backend for n, e in backends.items()}, ex,
                               progress, workers, fresh_pool=executors.watched_pool
                               if ex is not None and cluster is None else None,
                               fold=fold, new_fold=partial(JobFold, declared, big))
    failed = [r for r in reduced.results if r.error is not None]
    if failed and len(failed) == len(units) and all(r.bad_input for r in failed):
        raise errors.NotAReport(failed[0].error or "unreadable")
    job = fold.finish()
    for name in {r.unit.backend for r in failed} - set(job.collected):  # every unit failed
        first = next(r for r in failed if r.unit.backend == name)
        results.append(assembly.result_of(
            backends[name], Status.FAILED, reason=first.error, traceback=first.traceback))
    multi = len({r for rank_of in job.ranks.values() for r in rank_of}) > 1
    environment: dict[str, Any] = {"recorded": job.recorded, "reading": {
        "where": plan.kind, "workers": workers,
        "units": len(units), "read": reduced.read(),
        "seconds": round(reduced.seconds(), 3),
        "wall_seconds": round(reduced.wall_s, 3),
        **({"why": plan.why} if plan.why else {}),
        **({"retried": reduced.retried} if reduced.retried else {}),
        **({"not_read": [{"files": [p.name for p in r.unit.files], "why": r.error}
                         for r in failed]} if failed else {})}}
    merged: dict[str, Collected] = {}
    for name, out in job.collected.items():
        entry = backends[name]
        problems = job.problems.get(name)
        if problems:
            results.append(assembly.result_of(
                entry, Status.FAILED, reason=f"records that do not fit the schema: {problems[0]}",
                traceback="\n".join(problems)))
            continue
        unranked = job.unranked.get(name, [])
        if multi and unranked:
            out.notes.append(
                f"{len(unranked)} process(es) whose traces say no rank (in their header or "
                f"name) read as rank(s) {', '.join(map(str, unranked))}")
        merged[name] = out
        has_rows = any(out.rows.values()) or bool(out.metrics)
        results.append(assembly.result_of(
            entry, Status.OK if has_rows else Status.EMPTY,
            reason=None if has_rows else "the files held nothing to report",
            # absolute: the files stay where they were when the report is read from another
            # folder (a path relative to where analyze ran was read against the report's)
            artifacts={label: os.path.abspath(path) for label, path in out.artifacts.items()},
            notes=out.notes))
    roofs = recorded_ceilings(environment["recorded"])
    if roofs:
        environment["ceilings"] = roofs
    if job.world:
        environment["recorded"]["world_size"] = job.world
    run = RunInfo(command=[], cwd=str(cwd or Path.cwd()), started=started,
                  duration_s=time.perf_counter() - begin,
                  perfstack_version=perfstack.__version__, repeat=1, warmup=0,
                  timeout_s=None, complete=not reduced.interrupted, runs=[],
                  analyzed=[{"path": str(path), "backend": name}
                            for name, files in claimed.items() for path in files])
    across = None
    if multi:
        def across(report: Report) -> tuple[list[Metric], list[Finding]]:
            found = rank_figures(report, job.samples, publish_steps=False,
                                 steps_from="the traces' profiled steps", shares=job.shares,
                                 columns=job.columns)
            summary = job.columns.summary() if job.columns is not None else None
            if summary and summary["figures"]:  # (with the figures computed across ranks)
                report.environment["across_ranks"] = summary
            return found

    if job.rows_across_ranks is not None:  # (where build_report would say it)
        environment["rows_across_ranks"] = job.rows_across_ranks
    more = [_left_out_finding(missed)] if missed else []
    if failed and job.collected:  # some read: the report is of those
        more.append(_unread_finding(failed, len(units)))
    return assembly.build_report(
        run, environment, results, merged.values(), plugins.findings, across_ranks=across,
        more_findings=more, lead_metrics=() if multi else baseline_steps(paths))

