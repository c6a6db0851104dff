"""The driver: a baseline, then one isolated run per backend, merged into one Report.

The driver never imports the workload. Every run is a child process started through
``perfstack.inprocess.bootstrap`` (``perfstack.run.runner``); a backend's turn is
``perfstack.run.phases``. Whatever happens to one run (a crash, a timeout, a backend that
raises) is recorded, and the session goes on; Ctrl-C stops the current run, skips the rest,
and still returns a report of everything measured so far.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import perfstack
from perfstack.errors import UsageError
from perfstack.machine.envinfo import with_plugins
from perfstack.plugin.backend import Collected, Launch, Outcome, Workload, availability
from perfstack.plugin.manager import BackendEntry, HookResult, Plugins
from perfstack.report import (
    BackendResult,
    Finding,
    Metric,
    Report,
    RunInfo,
    RunRecord,
    Status,
)
from perfstack.run import assembly, nodes
from perfstack.run import baseline as baselines
from perfstack.run.ceilingstep import run_ceilings
from perfstack.run.options import AnsweringProgress, NoProgress, Progress, RunOptions
from perfstack.run.phases import BackendTurn, answers_first, riders, run_count
from perfstack.run.runner import Runner


class Session:
    """One ``perfstack run``: call :meth:`execute` once (``perfstack ab`` calls its steps,
    :meth:`begin`, :meth:`baseline_run`, :meth:`run_backend` and :meth:`finish`, to
    interleave two sessions)."""

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
        self.options = options
        self.plugin_failures = plugin_failures or []
        #: whether each backend can run here, and the runs of its own it asks for, asked
        #: once, now: the plan says "run 4 of 10" from the start (not "run 5 of 9" when an
        #: unavailable backend's turn comes), and each turn makes the runs the plan counted
        self.available = {e.backend.name: availability(e.backend) for e in selected}
        self.runs = {e.backend.name: run_count(e, options.backend_options.get(e.backend.name, {}))
                     if e.backend.own_run and self.available[e.backend.name].ok else 0
                     for e in selected}
        planned = options.warmup + options.repeat + sum(self.runs.values())
        self.runner = Runner(workload, self.cwd, run_dir, report_dir, options,
                             progress or NoProgress(), planned, riders(selected))
        #: the first warm-up or baseline run that did not end cleanly (or the answer-first
        #: run that timed out: the workload hangs), if any
        self.failed_unprofiled: Outcome | None = None
        self.results: list[BackendResult] = []
        self.collected: dict[str, Collected] = {}
        self._started = ""
        self._begin = 0.0
        self._env: dict[str, Any] = {}
        self._answered = False  # the answer so far was said (AnsweringProgress)
        self._baseline_done = False  # the warm-up and baseline runs are behind

    @property
    def interrupted(self) -> bool:
        """Whether the user stopped the session (the runs after it are skipped)."""
        return self.runner.interrupted

    @interrupted.setter
    def interrupted(self, value: bool) -> None:
        self.runner.interrupted = value

    @property
    def records(self) -> list[RunRecord]:
        """Every run made so far, in order."""
        return self.runner.records

    @property
    def baseline(self) -> list[Outcome]:
        """The baseline runs' outcomes."""
        return self.runner.baseline

    def execute(self) -> Report:
        """Run the baseline and every selected backend (under ``answer_first``, those with
        runs of their own before the baseline); return the report."""
        self.begin()
        first = [e for e in self.selected if self.options.answer_first and answers_first(e)]
        early = [self.run_backend(entry) for entry in first]
        hung = next((o for _, o in early if o is not None and o.record.exit.status == "timeout"),
                    None)
        if hung is not None and not self.options.keep_going:
            # The warm-up and every run after it would wait out the timeout again.
            self.failed_unprofiled = hung
        try:
            if not self.interrupted and self.failed_unprofiled is None:
                self._baseline()
        except KeyboardInterrupt:
            self.interrupted = True
        self._baseline_done = True
        for result, outcome in early:  # their overhead, now that the baseline ran
            if result is not None and outcome is not None:
                result.overhead, result.overhead_note = baselines.overhead(
                    outcome, self.baseline, self.options.repeat, self.options.steps)
                result.notes.append("run first, before the warm-up and the baseline: its "
                                    "answer came after one run of the workload")
        for entry in self.selected:
            if entry not in first:
                self.run_backend(entry)
        return self.finish()

    def begin(self) -> None:
        """Note the start and capture the machine's environment: before any run."""
        self._started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._begin = time.perf_counter()
        self._env = self._environment()

    def baseline_run(self, role: str, index: int) -> bool:
        """Run the workload once with no profiler (``role`` warmup or baseline); return
        whether the baseline should go on (False after an unclean run or an interruption)."""
        outcome = self.runner.run(f"{role}-{index}", role, None, Launch())
        if self.interrupted:
            if role == "baseline":  # what it did until then, for the backends that read it
                self.baseline.append(outcome)
            return False
        if role == "baseline":
            self.baseline.append(outcome)
        else:
            self.runner.warmups.append(outcome)
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

    def run_backend(self, entry: BackendEntry) -> tuple[BackendResult | None, Outcome | None]:
        """Run one backend (or record why it was skipped); return its result and its own
        run's outcome (None where it made none)."""
        name = entry.backend.name
        turn = BackendTurn(entry, self.runner, self.failed_unprofiled, self.available[name],
                           self.runs[name])
        taken = turn.take()
        said_nothing = taken.status in (Status.EMPTY, Status.SKIPPED, Status.UNAVAILABLE) or (
            turn.collected is not None and bool(turn.collected.empty))  # (of a failed run)
        if entry.backend.name in self.options.riding and said_nothing:
            return None, None  # riding along unasked, with nothing to say: not in the report
        self.results.append(taken)
        if turn.collected is not None:
            self.collected[entry.backend.name] = turn.collected
            self._answer_so_far(entry)
        return self.results[-1], turn.outcome

    def _answer_so_far(self, entry: BackendEntry) -> None:
        """Once a backend is in and other runs are still to come (backends, or the baseline),
        let a progress display that can say the answer of the runs so far say it (once)."""
        progress = self.runner.progress
        riding = self.options.riding  # not asked for: not counted
        done = len([r for r in self.results if r.name not in riding])
        total = len([e for e in self.selected if e.backend.name not in riding])
        if self._answered or self.interrupted or (done >= total and self._baseline_done) or (
                not isinstance(progress, AnsweringProgress)):
            return
        self._answered = progress.answer_so_far(entry.backend.name, done, total,
                                                lambda: self._assemble(preview=True))

    def finish(self) -> Report:
        """Assemble the report of everything run so far."""
        return self._assemble(preview=False)

    def _assemble(self, preview: bool) -> Report:
        """The report of the runs so far; a ``preview`` (the answer while runs remain)
        changes nothing of the session's and measures no ceilings."""
        options, runner = self.options, self.runner
        env = dict(self._env) if preview else self._env
        results = list(self.results) if preview else self.results
        env.update(baselines.workload_environment(self.baseline))
        run_ceilings(env, self.collected.values(), NoProgress() if preview else runner.progress,
                     may_measure=not self.interrupted and not preview)
        if options.nproc_per_node:
            torchrun_args = options.torchrun_args or ["--standalone"]
            env["distributed"] = {"nproc_per_node": options.nproc_per_node,
                                  "profiled_ranks": runner.ranks(),
                                  "torchrun_args": torchrun_args,
                                  "node": nodes.node_rank(torchrun_args, os.environ),
                                  "job": nodes.job_identity(torchrun_args, os.environ)}
        for failure in self.plugin_failures:
            results.append(BackendResult(
                name=failure.plugin, status=Status.FAILED, layers=[],
                package=self.plugins.package_of(failure.plugin),
                reason="the plugin's perfstack_backends hook failed",
                traceback=failure.error))
        run = RunInfo(
            command=self.workload.command(), cwd=self.cwd, started=self._started,
            duration_s=time.perf_counter() - self._begin,
            perfstack_version=perfstack.__version__, repeat=options.repeat,
            warmup=options.warmup, timeout_s=options.timeout_s,
            complete=not self.interrupted, runs=self.records,
            steps={"warmup": options.steps.warmup, "measured": options.steps.measured}
            if options.steps else None)
        lead = [baselines.wall_metric(self.baseline, options.repeat),
                *baselines.instruction_metric(self.baseline),
                *baselines.workload_metrics(self.baseline),
                *baselines.step_metric(self.baseline, options.steps,
                                       bool(options.nproc_per_node)),
                *baselines.resident_metric(self.baseline, bool(options.nproc_per_node)),
                *baselines.teardown_metric(self.baseline)]
        across = None
        if options.nproc_per_node:
            steps = options.steps
            nproc = options.nproc_per_node

            def across(report: Report) -> tuple[list[Metric], list[Finding]]:
                return baselines.cross_rank(report, self.baseline, nproc,
                                  (steps.warmup, steps.measured) if steps else None)

        return assembly.build_report(
            run, env, results, self.collected.values(), self.plugins.findings,
            lead_metrics=lead, across_ranks=across,
            more_findings=assembly.left_running(runner.left_running))

    def _environment(self) -> dict[str, Any]:
        from perfstack.history import repository_of

        env = with_plugins(self.plugins)
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
