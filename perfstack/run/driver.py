"""The driver: a baseline, then one isolated run per backend, merged into one Report.

The driver never imports the workload. Every run is a child process started through
``perfstack.run.bootstrap``. Whatever happens to one run (a crash, a timeout, a backend that
raises) is recorded, and the session goes on; Ctrl-C stops the current run, skips the rest,
and still returns a report of everything measured so far.
"""

from __future__ import annotations

import os
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import perfstack
from perfstack.backend import (
    Collected,
    Launch,
    Outcome,
    ReadyAttachment,
    RunContext,
    Workload,
    availability,
)
from perfstack.errors import UsageError
from perfstack.machine import environment
from perfstack.pluginmanager import BackendEntry, HookResult, Plugins
from perfstack.report import (
    BackendResult,
    Finding,
    Quantity,
    Report,
    RunInfo,
    RunRecord,
    Status,
    order_findings,
)
from perfstack.run import assembly, collecting, rundir
from perfstack.run import baseline as baselines
from perfstack.run import launch as launching
from perfstack.run.bootstrap import HOOK_ERRORS_FILE, WINDOW_WAIT_S
from perfstack.run.options import (
    EstimatingProgress,
    NoProgress,
    Progress,
    RunOptions,
    rank_selected,
    selected_ranks,
)
from perfstack.run.process import ChildSpec, run_child


class Session:
    """One ``perfstack run``: call :meth:`execute` once."""

    def __init__(
        self,
        workload: Workload,
        selected: list[BackendEntry],
        plugins: Plugins,
        run_dir: Path,
        report_dir: Path,
        options: RunOptions,
        progress: Progress | None = None,
        plugin_failures: list[HookResult] | None = None,
        cwd: str | None = None,
    ) -> None:
        self.workload = workload
        self.cwd = cwd or os.getcwd()  # where the workload runs
        self.selected = selected
        self.plugins = plugins
        self.run_dir = run_dir
        self.report_dir = report_dir  # artifact paths in the report are relative to it
        self.options = options
        self.progress = progress or NoProgress()
        self.plugin_failures = plugin_failures or []
        self.records: list[RunRecord] = []
        self.baseline: list[Outcome] = []
        #: the first warm-up or baseline run that did not end cleanly, if any
        self.failed_unprofiled: Outcome | None = None
        self.results: list[BackendResult] = []
        self.collected: dict[str, Collected] = {}
        self.interrupted = False
        self.left_running: list[tuple[str, list[str]]] = []  # (run id, processes stopped)
        self._started = ""
        self._begin = 0.0
        self._runs_done = 0
        #: runs this session will make: warm-ups, baselines, one per available backend with
        #: its own run (asked now, so "run 4 of 10" does not become "run 5 of 9" when an
        #: unavailable backend's turn comes; the check is asked once per process)
        self._planned = options.warmup + options.repeat + sum(
            self._run_count(e) for e in selected
            if e.backend.own_run and availability(e.backend).ok)
        self._env: dict[str, Any] = {}

    # -- helpers ---------------------------------------------------------------------------

    def _run(self, label: str, role: str, backend: str | None, launch: Launch,
             on_started: Callable[[int], None] | None = None,
             python: str | None = None,
             on_rank_started: Callable[[int, Path, int], None] | None = None,
             in_plan: bool = False) -> Outcome:
        """Make one run (a child of its own, through the bootstrap) and record it."""
        folder = rundir.run_subfolder(self.run_dir, label)
        config = launching.write_config(folder, launch, role, self.options.steps)
        nproc = self.options.nproc_per_node
        argv = launching.child_argv(self.workload, launch, folder, python, nproc,
                                    self.options.torchrun_args)
        env = launching.child_env(launch, config, python, self.run_dir)
        spec = ChildSpec(argv, env, self.cwd, folder, self.options.timeout_s,
                         self.options.kill_grace_s,
                         count_instructions=role in ("warmup", "baseline"))
        self._runs_done += 1
        planned = max(self._planned, self._runs_done)
        counted = role != "extra" or in_plan  # a run the progress counts ("run 5 of 9")
        self.progress.begin(f"run {self._runs_done} of {planned}, {label}" if counted else label)
        if isinstance(self.progress, EstimatingProgress):
            walls = baselines.clean_walls(self.baseline)
            self.progress.estimate(statistics.median(walls) if walls and counted else None,
                                   planned - self._runs_done)
        on_tick: Callable[[float], None] = self.progress.tick
        windowed = self.options.steps is not None and self.options.steps.warmup > 0
        if nproc and (on_rank_started is not None or windowed):
            on_tick = launching.rank_watcher(folder, self.progress.tick, on_rank_started,
                                             windowed)
        elif windowed:  # attach after the warm-up
            on_tick = launching.window_watcher(folder, self.progress.tick, on_started)
        result = run_child(spec, on_started=None if nproc or windowed else on_started,
                           on_tick=on_tick)
        if nproc and on_rank_started is not None:
            on_tick(0.0)  # ranks that started between the last tick and the end
        record = launching.record_of(label, role, backend, argv, result, self.report_dir)
        record.probe = rundir.read_probe(rundir.primary_dir(folder))
        if spec.count_instructions:
            record.instructions = Quantity(result.instructions, "count",
                                           result.instructions_reason)
        self.records.append(record)
        if result.left_running:
            self.left_running.append((label, result.left_running))
        self.progress.end(f"run {self._runs_done} of {max(self._planned, self._runs_done)}, "
                          f"{label}" if counted else label, record.exit.describe())
        if record.exit.status == "interrupted":
            self.interrupted = True
        return launching.outcome_of(record, folder, result, bool(nproc))

    def _extra_runner(self, backend: str) -> Callable[..., Outcome]:
        def run_extra(label: str, *, env: dict[str, str] | None = None,
                      python: str | None = None) -> Outcome:
            if self.interrupted:
                raise KeyboardInterrupt
            return self._run(f"{backend}/{label}", "extra", backend, Launch(env=dict(env or {})),
                             python=python)
        return run_extra

    # -- the session ---------------------------------------------------------------------

    def execute(self) -> Report:
        """Run the baseline and every selected backend; return the report."""
        self.begin()
        try:
            self._baseline()
        except KeyboardInterrupt:
            self.interrupted = True
        for entry in self.selected:
            self.run_backend(entry)
        return self.finish()

    # -- the steps of a session, for drivers that interleave two (perfstack ab) -------------

    def begin(self) -> None:
        """Note the start and capture the machine's environment: before any run."""
        self._started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._begin = time.perf_counter()
        self._env = self._environment()

    def baseline_run(self, role: str, index: int) -> bool:
        """Run the workload once with no profiler (``role`` warmup or baseline); return
        whether the baseline should go on (False after an unclean run or an interruption)."""
        outcome = self._run(f"{role}-{index}", role, None, Launch())
        if self.interrupted:
            return False
        if role == "baseline":
            self.baseline.append(outcome)
        if not outcome.record.exit.clean and self.failed_unprofiled is None:
            self.failed_unprofiled = outcome
        steps = self.options.steps
        if steps is not None and outcome.record.exit.clean and not outcome.steps:
            raise UsageError(
                f"--steps {steps.measured}: the workload marked no steps in its first run, so "
                "it cannot be ended after them (call perfstack.step() once per step, or "
                "train with a torch optimizer); it ran to its end")
        # A workload that crashes or hangs will do it again: don't repeat it.
        return outcome.record.exit.clean

    def run_backend(self, entry: BackendEntry) -> None:
        """Run one backend (or record why it was skipped)."""
        if self.interrupted:
            self.results.append(self._result(entry, Status.SKIPPED,
                                             reason="not run: the session was interrupted"))
            return
        try:
            self.results.append(self._backend(entry))
        except KeyboardInterrupt:
            self.interrupted = True
            self.results.append(self._result(entry, Status.INTERRUPTED,
                                             reason="interrupted while collecting"))

    def finish(self) -> Report:
        """Assemble the report of everything run so far."""
        env = self._env
        env.update(baselines.workload_environment(self.baseline))
        if self.options.nproc_per_node:
            env["distributed"] = {"nproc_per_node": self.options.nproc_per_node,
                                  "profiled_ranks": self._ranks(),
                                  "torchrun_args": self.options.torchrun_args or ["--standalone"]}
        for failure in self.plugin_failures:
            self.results.append(BackendResult(
                name=failure.plugin, status=Status.FAILED, layers=[],
                package=self.plugins.package_of(failure.plugin),
                reason="the plugin's perfstack_backends hook failed",
                traceback=failure.error))
        report = Report(
            run=RunInfo(
                command=self.workload.command(), cwd=self.cwd, started=self._started,
                duration_s=time.perf_counter() - self._begin,
                perfstack_version=perfstack.__version__,
                repeat=self.options.repeat, warmup=self.options.warmup,
                timeout_s=self.options.timeout_s, complete=not self.interrupted,
                runs=self.records,
                steps={"warmup": self.options.steps.warmup,
                       "measured": self.options.steps.measured} if self.options.steps else None),
            environment=env,
            backends=self.results,
        )
        for collected in self.collected.values():
            for layer, rows in collected.rows.items():
                report.layers[layer].extend(rows)
            report.metrics.extend(collected.metrics)
            report.findings.extend(collected.findings)
        report.metrics[:0] = [
            baselines.wall_metric(self.baseline, self.options.repeat),
            *baselines.instruction_metric(self.baseline),
            *baselines.workload_metrics(self.baseline),
            *baselines.step_metric(self.baseline, self.options.steps,
                                  bool(self.options.nproc_per_node))]
        if self.options.nproc_per_node:
            from perfstack.analysis.distributed import cross_rank

            steps = self.options.steps
            metrics, findings = cross_rank(report, self.baseline, self.options.nproc_per_node,
                                           (steps.warmup, steps.measured) if steps else None)
            report.metrics.extend(metrics)
            report.findings.extend(findings)
        report.findings.extend(self._findings(report))
        report.findings.extend(self._left_running())
        report.findings[:] = order_findings(report.findings)  # as every format shows them
        return report

    def _left_running(self) -> list[Finding]:
        """A finding naming the processes runs left behind (and perfstack stopped)."""
        return assembly.left_running(self.left_running)

    def _environment(self) -> dict[str, Any]:
        from perfstack.history import repository_of

        env = environment.capture_with_plugins(self.plugins)
        # The workload's repository as it is when the run starts (the history's commit).
        where = Path(self.workload.target).parent if not self.workload.module else Path(
            self.cwd)
        repo = repository_of(where if str(where) else Path("."),
                             None if self.workload.module else Path(self.workload.target))
        if repo is not None:
            env["repository"] = repo
        return env

    def _baseline(self) -> None:
        plan = [("warmup", i) for i in range(1, self.options.warmup + 1)]
        plan += [("baseline", i) for i in range(1, self.options.repeat + 1)]
        for role, i in plan:
            if not self.baseline_run(role, i):
                return

    def _result(self, entry: BackendEntry, status: Status, **kw: Any) -> BackendResult:
        return assembly.result_of(entry, status, **kw)

    def _run_count(self, entry: BackendEntry) -> int:
        try:
            count = int(entry.backend.run_count(
                self.options.backend_options.get(entry.backend.name, {})))
        except Exception:
            return 1  # a broken run_count: one run, as every backend had
        return max(1, min(count, 10))

    def _backend(self, entry: BackendEntry) -> BackendResult:
        backend = entry.backend
        runs = self._run_count(entry) if backend.own_run else 0
        available = availability(backend)
        if available.error is not None:  # (its runs were never in the plan)
            return self._result(entry, Status.FAILED, reason="check() raised",
                                traceback=available.error)
        if not available.ok:
            return self._result(entry, Status.UNAVAILABLE, reason=available.reason,
                                fix=available.fix)
        if not backend.own_run and self.options.repeat == 0:
            return self._result(entry, Status.SKIPPED, reason=(
                "not run: it reads the baseline runs, and --repeat 0 made none"))
        failed = self.failed_unprofiled
        if backend.own_run and failed is not None and not self.options.keep_going:
            # It would fail again, and profile the failure, not the workload.
            self._planned -= runs
            return self._result(entry, Status.SKIPPED, reason=(
                f"not run: the workload failed without a profiler ({failed.record.id}: "
                f"{failed.record.exit.describe()}); --keep-going runs every backend anyway"))
        folder = rundir.run_subfolder(self.run_dir, backend.name)
        ctx = RunContext(backend.name, self.workload, folder,
                         self.options.backend_options.get(backend.name, {}),
                         self.options.timeout_s, list(self.baseline),
                         run_extra=self._extra_runner(backend.name), steps=self.options.steps)
        if not backend.own_run:
            return self._collect(entry, ctx, None)
        try:
            launch = backend.launch(ctx)
        except Exception:
            self._planned -= runs
            return self._result(entry, Status.FAILED, reason="launch() raised",
                                traceback=traceback.format_exc())
        errors: list[str] = []
        per_rank = backend.is_per_rank(launch)
        outcome = self._attached_run(entry, ctx, backend.name, launch, errors)
        for index in range(1, runs):
            if self.interrupted or not outcome.record.exit.clean:
                self._planned -= runs - index  # a crash would crash again
                break
            later = replace(ctx, run_index=index)
            try:
                again = backend.launch(later)
            except Exception:
                errors.append(f"launch() of run {index + 1} raised:\n" + traceback.format_exc())
                self._planned -= runs - index
                break
            outcome.more.append(self._attached_run(
                entry, later, f"{backend.name}/run-{index + 1}", again, errors, home=folder))
        for where in [folder, *(rundir.rank_dir(folder, r) for r in self._ranks(folder))]:
            hook_errors = where / HOOK_ERRORS_FILE
            if hook_errors.exists():
                errors.append(hook_errors.read_text("utf-8", errors="replace"))
        return self._collect(entry, ctx, outcome, errors, per_rank)

    def _attached_run(self, entry: BackendEntry, ctx: RunContext, label: str, launch: Launch,
                      errors: list[str], home: Path | None = None) -> Outcome:
        """One run of a backend: launched with ``launch``, attached to as it starts (per
        rank, or once for the whole job), its attachments stopped after. A later run of the
        same backend (``home``: the first run's folder) is attached with the first run's
        folders, so that everything the backend writes is in one place."""
        backend = entry.backend
        attachments: list[Any] = []

        def on_started(pid: int, where: RunContext = ctx) -> None:
            try:
                handle = backend.attach(where, pid)
            except Exception:
                errors.append("attach() raised:\n" + traceback.format_exc())
                return
            if handle is None:
                return
            attachments.append(handle)
            if self.options.steps is not None and isinstance(handle, ReadyAttachment):
                try:
                    handle.wait_ready(WINDOW_WAIT_S / 2)  # the workload waits for it there
                except Exception:
                    errors.append("wait_ready() raised:\n" + traceback.format_exc())

        whole_job: list[int] = []  # the rank a job-wide backend attached to, once it has

        def on_rank_started(rank: int, where: Path, pid: int) -> None:
            if not rank_selected(self.options.ranks, rank):
                return
            if backend.is_per_rank(launch):
                if home is not None:
                    where = rundir.rank_dir(home, rank)
                    where.mkdir(parents=True, exist_ok=True)
                on_started(pid, replace(ctx, artifact_dir=where))
            elif not whole_job:
                whole_job.append(rank)
                on_started(pid)

        outcome = self._run(label, "backend" if home is None else "extra", backend.name,
                            launch, on_started, on_rank_started=on_rank_started, in_plan=True)
        for handle in attachments:
            try:
                handle.stop()
            except Exception:
                errors.append("stopping its attachment raised:\n" + traceback.format_exc())
        return outcome

    def _ranks(self, folder: Path | None = None) -> list[int]:
        """The selected ranks among those that ran on this node (in ``folder``, else in the
        first baseline run)."""
        if not self.options.nproc_per_node:
            return []
        if folder is None:
            folder = self.baseline[0].artifact_dir if self.baseline else None
        present = rundir.ranks_in(folder) if folder is not None else []
        return selected_ranks(self.options.ranks, present)

    def _collect(self, entry: BackendEntry, ctx: RunContext, outcome: Outcome | None,
                 errors: list[str] | None = None, per_rank: bool = True) -> BackendResult:
        backend = entry.backend
        if outcome is not None:
            status = assembly.status_of(outcome.record.exit.status, outcome.record.exit.clean)
            run_id: str | None = outcome.record.id
            wall = outcome.record.wall_s
            overhead, note = baselines.overhead(outcome, self.baseline, self.options.repeat,
                                              self.options.steps)
        else:
            worst = next((o for o in self.baseline if not o.record.exit.clean), None)
            status = (assembly.status_of(worst.record.exit.status, False) if worst else Status.OK)
            run_id, wall, overhead = None, None, None
            note = "reads the baseline runs: no run of its own, no overhead"
        result = self._result(entry, status, run=run_id, wall_s=wall, overhead=overhead,
                              overhead_note=note)
        if outcome is not None and not outcome.record.exit.clean:
            result.reason = f"the workload ended with {outcome.record.exit.describe()}"
        kept = collecting.collect(
            result, backend, ctx, outcome, nproc=self.options.nproc_per_node,
            ranks_spec=self.options.ranks, per_rank=per_rank,
            timeout_s=self.options.collect_timeout_s, errors=errors or [],
            report_dir=self.report_dir)
        if kept is not None:
            self.collected[backend.name] = kept
        return result

    def _findings(self, report: Report) -> list[Finding]:
        return self.plugins.findings(report)
