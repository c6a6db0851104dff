"""One backend's turn in a session: check it, launch its runs (attached as each run or rank
starts), stop its attachments, collect what it measured.

Every call into the backend goes through ``perfstack.plugin.calls.call``: a backend that raises
is recorded as failed (or its error kept in its notes), and the session goes on.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from perfstack.plugin.backend import (
    Availability,
    Collected,
    InProcessHook,
    Launch,
    Outcome,
    ReadyAttachment,
    RunContext,
    availability,
)
from perfstack.plugin.calls import call
from perfstack.plugin.manager import BackendEntry
from perfstack.records import replace
from perfstack.report import BackendResult, Status
from perfstack.run import assembly, collecting
from perfstack.run import baseline as baselines
from perfstack.run.options import rank_selected
from perfstack.run.runner import Runner
from perfstack.runfolder import rundir
from perfstack.runfolder.handshake import WINDOW_WAIT_S

#: A backend asks for at most this many runs of its own.
MAX_RUNS = 10


def run_count(entry: BackendEntry, options: dict[str, Any]) -> int:
    """How many runs of its own the backend asks for (one when its ``run_count`` raises)."""
    asked = call(lambda: int(entry.backend.run_count(options)), "run_count")
    return max(1, min(asked.value, MAX_RUNS)) if asked.value is not None else 1


def answers_first(entry: BackendEntry) -> bool:
    """Whether the backend runs before the warm-up and the baseline when the session answers
    first: a quick backend with a run of its own (the sampler), whose answer needs no
    baseline."""
    return entry.backend.quick and entry.backend.own_run


def riders(entries: list[BackendEntry]) -> list[InProcessHook]:
    """The in-process hooks the available backends among ``entries`` load into every run
    (``Backend.rider``); a backend whose ``rider`` raises loads none."""
    out = []
    for entry in entries:
        if availability(entry.backend).ok:
            hook = call(entry.backend.rider, "rider").value
            if isinstance(hook, InProcessHook):
                out.append(hook)
    return out


def never_imported(module: str | None, baseline: list[Outcome]) -> str | None:
    """``module`` when every clean baseline run said what it imported and none imported it;
    None when it did, or nobody can tell (no baseline, an older bootstrap)."""
    if module is None:
        return None
    seen = [rundir.RunFolder(o.artifact_dir).workload_env() for o in baseline
            if o.record.exit.clean]
    imported = [facts.get("imported") for facts in seen if facts is not None]
    if not seen or len(imported) != len(seen) or not all(isinstance(i, list) for i in imported):
        return None
    return module if all(module not in i for i in imported if isinstance(i, list)) else None


class BackendTurn:
    """One backend's turn: :meth:`take` returns its result and what it collected."""

    def __init__(self, entry: BackendEntry, runner: Runner, failed_unprofiled: Outcome | None,
                 available: Availability, runs: int) -> None:
        self.entry = entry
        self.backend = entry.backend
        self.runner = runner
        self.options = runner.options
        #: whether the backend can run here, and the runs of its own it asked for (0: none),
        #: as the session's plan asked them
        self.available = available
        self.runs = runs
        #: the first warm-up or baseline run that did not end cleanly, if any
        self.failed_unprofiled = failed_unprofiled
        #: the backend's own run, once made (its overhead may be measured again later)
        self.outcome: Outcome | None = None
        self.errors: list[str] = []
        self.collected: Collected | None = None

    def _result(self, status: Status, **kw: Any) -> BackendResult:
        given = self.options.backend_options.get(self.backend.name, {})
        defaults = {o.name: o.default for o in self.backend.options}
        changed = {k: v for k, v in given.items()
                   if k in defaults and v != defaults[k] and not (v in (None, "", False)
                                                                  and not defaults[k])}
        result = assembly.result_of(self.entry, status, options=changed, **kw)
        if self.backend.name in self.options.riding:
            result.notes.append(f"rode along: --plugins did not name it, and it costs no run "
                                f"(it reads the baseline runs); --plugins ...,-{self.backend.name}"
                                " refuses it")
        return result

    def _refusal(self) -> tuple[Status, dict[str, Any]] | None:
        """Why the backend does not run here, as its status and the result's fields (its
        runs taken out of the plan where they were in it), or None: it runs."""
        backend, runner, runs = self.backend, self.runner, self.runs
        if runner.interrupted and (backend.own_run or not runner.baseline):
            return Status.SKIPPED, {"reason": "not run: the session was interrupted"}
        available = self.available
        if available.error is not None:  # (its runs were never in the plan)
            return Status.FAILED, {"reason": "check() raised", "traceback": available.error}
        if not available.ok:
            return Status.UNAVAILABLE, {"reason": available.reason, "fix": available.fix}
        if not backend.own_run and self.options.repeat == 0:
            return Status.SKIPPED, {"reason": "not run: it reads the baseline runs, and "
                                              "--repeat 0 made none"}
        failed = self.failed_unprofiled
        if not backend.own_run and not runner.baseline and failed is not None:
            return Status.SKIPPED, {"reason": (
                "not run: it reads the baseline runs, and none was made: the workload failed "
                f"({failed.record.id}: {failed.record.exit.describe()})")}
        unused = never_imported(backend.needs_import, runner.baseline)
        if backend.own_run and unused is not None and not self.options.keep_going:
            runner.planned -= runs
            return Status.SKIPPED, {"reason": (
                f"not run: the workload never imported {unused} (its baseline runs did not), "
                f"so {backend.name} would see nothing; --keep-going runs it anyway")}
        if backend.own_run and failed is not None and not self.options.keep_going:
            # It would fail again, and profile the failure, not the workload.
            runner.planned -= runs
            how = ("without a profiler" if failed.record.backend is None
                   else "in its first run, and would again")
            return Status.SKIPPED, {"reason": (
                f"not run: the workload failed {how} ({failed.record.id}: "
                f"{failed.record.exit.describe()}); --keep-going runs every backend anyway")}
        return None

    def take(self) -> BackendResult:
        """Check, launch, run and collect; return the backend's result. After an
        interruption a backend that would start a run is skipped; one that reads the baseline
        runs still reads what they wrote (dynamo's records of a run stopped while it
        compiled): it starts nothing. Ctrl-C while it runs or collects ends its turn."""
        backend, runner = self.backend, self.runner
        try:
            own = self.options.backend_options.get(backend.name, {})
            runs = self.runs
            refused = self._refusal()
            if refused is not None:
                status, fields = refused
                return self._result(status, **fields)
            folder = rundir.run_subfolder(runner.run_dir, backend.name)
            ctx = RunContext(backend.name, runner.workload, folder, own,
                             self.options.timeout_s, list(runner.baseline),
                             run_extra=runner.extra_runner(backend.name),
                             steps=self.options.steps, warmups=list(runner.warmups))
            if not backend.own_run:
                return self._collect(ctx, None)
            launched = call(lambda: backend.launch(ctx), "launch")
            if launched.value is None:
                runner.planned -= runs
                return self._result(Status.FAILED, reason="launch() raised",
                                    traceback=launched.error or "launch() returned None")
            outcome = self._attached_run(ctx, backend.name, launched.value)
            for index in range(1, runs):
                if runner.interrupted or not outcome.record.exit.clean:
                    runner.planned -= runs - index  # a crash would crash again
                    break
                later = replace(ctx, run_index=index)
                again = call(partial(backend.launch, later), "launch")
                if again.value is None:
                    self.errors.append(again.failure(f"launch() of run {index + 1}"))
                    runner.planned -= runs - index
                    break
                outcome.more.append(self._attached_run(
                    later, f"{backend.name}/run-{index + 1}", again.value, home=folder))
            for log in rundir.RunFolder(folder).hook_errors(runner.ranks(folder)):
                self.errors.append(log.read_text("utf-8", errors="replace"))
            return self._collect(ctx, outcome, backend.is_per_rank(launched.value))
        except KeyboardInterrupt:
            runner.interrupted = True
            return self._result(Status.INTERRUPTED, reason="interrupted while collecting")

    def _attached_run(self, ctx: RunContext, label: str, launch: Launch,
                      home: Path | None = None) -> Outcome:
        """One run of the backend: launched with ``launch``, attached to as it starts (per
        rank, or once for the whole job), its attachments stopped after. A later run of the
        same backend (``home``: the first run's folder) is attached with the first run's
        folders, so that everything the backend writes is in one place."""
        backend, errors = self.backend, self.errors
        attachments: list[Any] = []

        def on_started(pid: int, where: RunContext = ctx) -> None:
            attached = call(lambda: backend.attach(where, pid), "attach")
            if not attached.ok:
                errors.append(attached.failure("attach()"))
            handle = attached.value
            if handle is None:
                return
            attachments.append(handle)
            if self.options.steps is not None and isinstance(handle, ReadyAttachment):
                # the workload waits for it there
                ready = call(lambda: handle.wait_ready(WINDOW_WAIT_S / 2), "wait_ready")
                if not ready.ok:
                    errors.append(ready.failure("wait_ready()"))

        whole_job: list[int] = []  # the rank a job-wide backend attached to, once it has

        def on_rank_started(rank: int, where: Path, pid: int) -> None:
            if not rank_selected(self.options.ranks, rank):
                return
            if backend.is_per_rank(launch):
                if home is not None:
                    where = rundir.RunFolder(home).rank(rank).path
                    where.mkdir(parents=True, exist_ok=True)
                on_started(pid, replace(ctx, artifact_dir=where))
            elif not whole_job:
                whole_job.append(rank)
                on_started(pid)

        outcome = self.runner.run(label, "backend" if home is None else "extra", backend.name,
                                  launch, on_started, on_rank_started=on_rank_started,
                                  in_plan=True)
        for handle in attachments:
            stopped = call(handle.stop, "stop")
            if not stopped.ok:
                errors.append(stopped.failure("stopping its attachment"))
        return outcome

    def _collect(self, ctx: RunContext, outcome: Outcome | None,
                 per_rank: bool = True) -> BackendResult:
        runner, options = self.runner, self.options
        self.outcome = outcome
        worst: Outcome | None = None  # (the baseline run a backend without a run reads)
        if outcome is not None:
            status = assembly.status_of(outcome.record.exit.status, outcome.record.exit.clean)
            run_id: str | None = outcome.record.id
            wall = outcome.record.wall_s
            overhead, note = baselines.overhead(outcome, runner.baseline, options.repeat,
                                              options.steps)
        else:
            worst = next((o for o in runner.baseline if not o.record.exit.clean), None)
            status = (assembly.status_of(worst.record.exit.status, False) if worst else Status.OK)
            run_id, wall, overhead = None, None, None
            note = "reads the baseline runs: no run of its own, no overhead"
        result = self._result(status, run=run_id, wall_s=wall, overhead=overhead,
                              overhead_note=note)
        if outcome is not None and not outcome.record.exit.clean:
            result.reason = f"the workload ended with {outcome.record.exit.describe()}"
        elif worst is not None:
            result.reason = (f"the baseline run it reads ({worst.record.id}) ended with "
                             f"{worst.record.exit.describe()}")
        self.collected = collecting.collect(
            result, self.backend, ctx, outcome, nproc=options.nproc_per_node,
            ranks_spec=options.ranks, per_rank=per_rank,
            timeout_s=options.collect_timeout_s, errors=self.errors,
            report_dir=runner.report_dir)
        return result
