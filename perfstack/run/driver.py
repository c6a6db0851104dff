"""The driver: a baseline, then one isolated run per backend, merged into one Report.

The driver never imports the workload. Every run is a child process started through
``perfstack.run.bootstrap``. Whatever happens to one run (a crash, a timeout, a backend that
raises) is recorded, and the session goes on; Ctrl-C stops the current run, skips the rest,
and still returns a report of everything measured so far.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import perfstack
from perfstack.backend import (
    Collected,
    Launch,
    Outcome,
    ReadyAttachment,
    RunContext,
    StepWindow,
    Workload,
    availability,
)
from perfstack.errors import UsageError
from perfstack.machine import environment
from perfstack.pluginmanager import BackendEntry, HookResult, Plugins
from perfstack.report import (
    BackendResult,
    Finding,
    Metric,
    Overhead,
    Quantity,
    Report,
    RunInfo,
    RunRecord,
    Status,
    order_findings,
)
from perfstack.report.files import write_json_atomic
from perfstack.run import assembly, collecting, ranks, rundir
from perfstack.run.bootstrap import CONFIG_ENV, HOOK_ERRORS_FILE, WINDOW_WAIT_S, WORKLOAD_ENV_FILE
from perfstack.run.process import ChildResult, ChildSpec, run_child

#: Start the bootstrap without the current folder on sys.path (Python 3.11+), so a folder
#: named like one of perfstack's modules where the user stands cannot shadow the installed
#: perfstack in the workload process; the bootstrap then puts the script's folder first.
SAFE_PATH = ["-P"] if sys.version_info >= (3, 11) else []

#: Why a figure that needs the baseline is unknown when the user asked for none.
NO_BASELINE = "no baseline run (--repeat 0): unknown"


class Progress(Protocol):
    """Told what the driver is doing, for a progress display."""

    def begin(self, label: str) -> None:
        """A run (warm-up, baseline repeat, or backend) starts."""

    def tick(self, elapsed: float) -> None:
        """The current run has been going for ``elapsed`` seconds."""

    def end(self, label: str, status: str) -> None:
        """The current run ended with ``status``."""


@runtime_checkable
class EstimatingProgress(Progress, Protocol):
    """A progress display that says how long is left ("about 20 s left")."""

    def estimate(self, per_run_s: float | None, runs_after: int) -> None:
        """How long a run takes (the baseline's median; None: not known yet) and how many runs
        come after the one that begins."""


class _NoProgress:
    def begin(self, label: str) -> None:
        pass

    def tick(self, elapsed: float) -> None:
        pass

    def end(self, label: str, status: str) -> None:
        pass


@dataclass
class RunOptions:
    """How to run the session."""

    repeat: int = 3
    warmup: int = 1
    timeout_s: float | None = None
    kill_grace_s: float = 5.0
    collect_timeout_s: float | None = 600.0  # a backend's collect() longer than this fails it
    #: Launch through torchrun with this many processes per node (None: a plain process).
    nproc_per_node: int | None = None
    ranks: str = "0"  # which ranks per-rank backends profile: "0", "all", "0,3"
    torchrun_args: list[str] = field(default_factory=list)  # passed through (rendezvous...)
    backend_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: --steps N --warmup-steps K: every run ends after K+N steps; backends measure N
    steps: StepWindow | None = None
    #: --keep-going: run every backend even after the workload failed without a profiler
    keep_going: bool = False


def selected_ranks(spec: str, present: list[int]) -> list[int]:
    """Return the ranks ``--ranks`` names ("0", "all", "0,3") among those present (the
    global ranks whose processes ran on this node)."""
    return ranks.among(spec, present)


def rank_selected(spec: str, rank: int) -> bool:
    """Return whether ``--ranks`` names ``rank``."""
    return ranks.selected(spec, rank)


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
        self.progress = progress or _NoProgress()
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
        #: runs this session will make: warm-ups, baselines, one per backend with its own run
        self._planned = options.warmup + options.repeat + sum(
            self._run_count(e) for e in selected if e.backend.own_run)
        self._env: dict[str, Any] = {}

    # -- helpers ---------------------------------------------------------------------------

    def _rel(self, path: Path) -> str:
        return os.path.relpath(path, self.report_dir)

    def _run(self, label: str, role: str, backend: str | None, launch: Launch,
             on_started: Callable[[int], None] | None = None,
             python: str | None = None,
             on_rank_started: Callable[[int, Path, int], None] | None = None,
             in_plan: bool = False) -> Outcome:
        folder = rundir.run_subfolder(self.run_dir, label)
        config = folder / rundir.BOOTSTRAP_CONFIG_FILE
        write_json_atomic(config, {
            "artifact_dir": str(folder.resolve()),
            "inprocess": [{"target": h.target, "options": h.options} for h in launch.inprocess],
            "probe": role != "extra",
            **({"steps": {"warmup": self.options.steps.warmup,
                          "measured": self.options.steps.measured}}
               if self.options.steps else {}),
        })
        target = ["-m", self.workload.target] if self.workload.module else [self.workload.target]
        nproc = self.options.nproc_per_node
        if nproc:
            # torchrun starts each rank as `python -m perfstack.run.bootstrap SCRIPT ARGS`.
            rendezvous = self.options.torchrun_args or ["--standalone"]
            # torchrun makes a torchelastic_* folder in the system's temporary folder for its
            # logs unless told where: it belongs in this run's folder (the user's own
            # --log-dir, given in --torchrun-args, wins).
            logs = ([] if any(a.startswith(("--log-dir", "--log_dir")) for a in rendezvous)
                    else [f"--log-dir={folder.resolve() / 'torchrun-logs'}"])
            argv = [*launch.wrap, python or sys.executable, "-m", "torch.distributed.run",
                    f"--nproc-per-node={nproc}", *rendezvous, *logs, "-m",
                    "perfstack.run.bootstrap", *target, *self.workload.args]
        else:
            argv = [*launch.wrap, python or sys.executable, *SAFE_PATH, "-m",
                    "perfstack.run.bootstrap", *target, *self.workload.args]
        env = {**os.environ, **launch.env, CONFIG_ENV: str(config.resolve())}
        if python is not None and os.path.realpath(python) != os.path.realpath(sys.executable):
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(self._bootstrap_path()), launch.env.get("PYTHONPATH")) if p)
        spec = ChildSpec(argv, env, self.cwd, folder, self.options.timeout_s,
                         self.options.kill_grace_s,
                         count_instructions=role in ("warmup", "baseline"))
        self._runs_done += 1
        planned = max(self._planned, self._runs_done)
        counted = role != "extra" or in_plan  # a run the progress counts ("run 5 of 9")
        self.progress.begin(f"run {self._runs_done} of {planned}, {label}" if counted else label)
        if isinstance(self.progress, EstimatingProgress):
            walls = self._clean_baseline_walls()
            self.progress.estimate(statistics.median(walls) if walls and counted else None,
                                   planned - self._runs_done)
        on_tick: Callable[[float], None] = self.progress.tick
        windowed = self.options.steps is not None and self.options.steps.warmup > 0
        if nproc and (on_rank_started is not None or windowed):
            on_tick = self._rank_watcher(folder, on_rank_started, windowed)
        elif windowed:
            on_tick = self._window_watcher(folder, on_started)  # attach after the warm-up
        result = run_child(spec, on_started=None if nproc or windowed else on_started,
                           on_tick=on_tick)
        if nproc and on_rank_started is not None:
            on_tick(0.0)  # ranks that started between the last tick and the end
        record = self._record(label, role, backend, argv, result)
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
        if nproc:
            first = rundir.primary_dir(folder)
            started = rundir.read_started(first)
            pid, start_ns = started if started else (None, None)
            record.steps = rundir.read_steps(first)
            return Outcome(record, folder, pid, start_ns, record.steps)
        record.steps = rundir.read_steps(folder)
        return Outcome(record, folder, result.workload_pid, result.start_ns, record.steps)

    def _rank_watcher(self, folder: Path,
                      on_rank_started: Callable[[int, Path, int], None] | None,
                      windowed: bool = False) -> Callable[[float], None]:
        """Return an on_tick callback that reports each rank's pid once it has started (with
        ``windowed``, once its measured window of steps has opened; the rank then waits
        until its samplers are attached)."""
        seen: set[int] = set()

        def tick(elapsed: float) -> None:
            self.progress.tick(elapsed)
            for rank in rundir.ranks_in(folder):
                if rank in seen:
                    continue
                where = rundir.rank_dir(folder, rank)
                if windowed:
                    pid = rundir.read_window(where)
                else:
                    found = rundir.read_started(where)
                    pid = found[0] if found is not None else None
                if pid is not None:
                    seen.add(rank)
                    try:
                        if on_rank_started is not None:
                            on_rank_started(rank, where, pid)
                    finally:
                        if windowed:
                            rundir.window_go(where)
        return tick

    def _window_watcher(self, folder: Path,
                        on_started: Callable[[int], None] | None) -> Callable[[float], None]:
        """Return an on_tick callback that, once the measured window of ``--steps`` opens
        (the workload has made its warm-up steps and waits), calls ``on_started`` (samplers
        attach) and lets the workload go on."""
        done: list[int] = []

        def tick(elapsed: float) -> None:
            self.progress.tick(elapsed)
            if not done:
                pid = rundir.read_window(folder)
                if pid is not None:
                    done.append(pid)
                    try:
                        if on_started is not None:
                            on_started(pid)
                    finally:
                        rundir.window_go(folder)
        return tick

    def _bootstrap_path(self) -> Path:
        """A folder holding only perfstack (a link), for another interpreter's sys.path.

        perfstack's bootstrap and ``perfstack/__init__`` need nothing beyond the standard
        library, so another interpreter (a free-threaded build) can run them; the rest of
        this interpreter's site-packages must not leak into it.
        """
        shim = self.run_dir / ".interpreter-path"
        link = shim / "perfstack"
        if not link.exists():
            shim.mkdir(parents=True, exist_ok=True)
            link.symlink_to(Path(perfstack.__file__).resolve().parent, target_is_directory=True)
        return shim

    def _extra_runner(self, backend: str) -> Callable[..., Outcome]:
        def run_extra(label: str, *, env: dict[str, str] | None = None,
                      python: str | None = None) -> Outcome:
            if self.interrupted:
                raise KeyboardInterrupt
            return self._run(f"{backend}/{label}", "extra", backend, Launch(env=dict(env or {})),
                             python=python)
        return run_extra

    def _record(self, label: str, role: str, backend: str | None, argv: list[str],
                result: ChildResult) -> RunRecord:
        return RunRecord(
            id=label, role=role, backend=backend, argv=argv, started=result.started,
            wall_s=result.wall_s, exit=result.exit, rusage=result.rusage,
            stdout=self._rel(result.stdout) if result.stdout else None,
            stderr=self._rel(result.stderr) if result.stderr else None,
            python_stack=result.python_stack,
            stdout_tail=result.stdout_tail, stderr_tail=result.stderr_tail,
            machine_load=result.machine_load,
        )

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
        env.update(self._workload_environment())
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
        report.metrics[:0] = [self._wall_metric(), *self._instruction_metric(),
                              *self._workload_metrics(), *self._step_metric()]
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

    def _workload_environment(self) -> dict[str, Any]:
        """What the workload process itself saw (the torch it imported, its threads)."""
        for outcome in self.baseline:
            try:
                facts = json.loads((rundir.primary_dir(outcome.artifact_dir) / WORKLOAD_ENV_FILE)
                                   .read_text("utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(facts, dict) and isinstance(facts.get("torch"), dict):
                return {"torch": facts["torch"]}
        return {}

    def _baseline(self) -> None:
        plan = [("warmup", i) for i in range(1, self.options.warmup + 1)]
        plan += [("baseline", i) for i in range(1, self.options.repeat + 1)]
        for role, i in plan:
            if not self.baseline_run(role, i):
                return

    def _clean_baseline_walls(self) -> list[float]:
        return [o.record.wall_s for o in self.baseline
                if o.record.exit.clean and o.record.wall_s is not None]

    def _wall_metric(self) -> Metric:
        metric = assembly.wall_metric(self._clean_baseline_walls())
        if self.options.repeat == 0:
            metric.reason = NO_BASELINE
        return metric

    def _instruction_metric(self) -> list[Metric]:
        """The baseline's instruction counts, when the machine counted them in every run."""
        return assembly.instruction_metric([
            o.record.instructions.value for o in self.baseline
            if o.record.exit.clean and o.record.instructions is not None])

    def _step_metric(self) -> list[Metric]:
        """The baseline's own step time (under torchrun, each rank's: ``cross_rank``)."""
        if self.options.nproc_per_node:
            return []
        steps = self.options.steps
        return assembly.step_metric([
            rundir.read_step_times(rundir.primary_dir(o.artifact_dir))
            for o in self.baseline if o.record.exit.clean],
            steps.warmup if steps else 0, steps.measured if steps else None)

    def _workload_metrics(self) -> list[Metric]:
        """Return what the workload reported with perfstack.report_metric, across the baseline."""
        return assembly.workload_metrics([
            rundir.read_workload_metrics(rundir.primary_dir(o.artifact_dir))
            for o in self.baseline if o.record.exit.clean])

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
        if available.error is not None:
            self._planned -= runs  # its runs will not be made
            return self._result(entry, Status.FAILED, reason="check() raised",
                                traceback=available.error)
        if not available.ok:
            self._planned -= runs
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

    def _collect_ranks(self, backend: Any, ctx: RunContext, outcome: Outcome | None,
                       per_rank: bool = True) -> Collected:
        """Collect once, or once per selected rank (relabelled) for per-rank backends."""
        if outcome is None or not self.options.nproc_per_node or not per_rank:
            result: Collected = backend.collect(ctx, outcome)
            return result
        ranks = self._ranks(outcome.artifact_dir)
        merged = Collected()
        if not ranks:
            merged.notes.append(f"no rank named by --ranks {self.options.ranks} ran on this "
                                "node (--ranks takes global ranks, or all)")
        for rank in ranks:
            where = rundir.rank_dir(outcome.artifact_dir, rank)
            started = rundir.read_started(where)
            part = backend.collect(replace(ctx, artifact_dir=where), Outcome(
                outcome.record, where, started[0] if started else None,
                started[1] if started else None, rundir.read_steps(where)))
            assembly.merge_rank(merged, part, rank, prefix=len(ranks) > 1)
        if ranks:
            merged.notes.append(f"ranks {', '.join(map(str, ranks))} of "
                                f"{self.options.nproc_per_node} on this node profiled (--ranks)")
        return merged

    def _collect(self, entry: BackendEntry, ctx: RunContext, outcome: Outcome | None,
                 errors: list[str] | None = None, per_rank: bool = True) -> BackendResult:
        backend = entry.backend
        if outcome is not None:
            status = assembly.status_of(outcome.record.exit.status, outcome.record.exit.clean)
            run_id: str | None = outcome.record.id
            wall = outcome.record.wall_s
            overhead, note = self._overhead(outcome)
        else:
            worst = next((o for o in self.baseline if not o.record.exit.clean), None)
            status = (assembly.status_of(worst.record.exit.status, False) if worst else Status.OK)
            run_id, wall, overhead = None, None, None
            note = "reads the baseline runs: no run of its own, no overhead"
        result = self._result(entry, status, run=run_id, wall_s=wall, overhead=overhead,
                              overhead_note=note)
        if outcome is not None and not outcome.record.exit.clean:
            result.reason = f"the workload ended with {outcome.record.exit.describe()}"
        began = time.perf_counter()
        try:
            collected = collecting.call_with_timeout(
                lambda: self._collect_ranks(backend, ctx, outcome, per_rank),
                self.options.collect_timeout_s)
            problems = assembly.malformed(collected)
            result.collect_s = time.perf_counter() - began
        except collecting.CollectTimeout as exc:
            errors = [*(errors or []), str(exc)]
        except Exception:
            errors = [*(errors or []), "collect() raised:\n" + traceback.format_exc()]
        else:
            if problems:
                errors = [*(errors or []), "malformed records: " + "; ".join(problems[:5])]
            else:
                self.collected[backend.name] = collected
                result.notes.extend(collected.notes)
                if result.status is Status.OK and collected.empty:
                    result.status, result.reason = Status.EMPTY, collected.empty
                elif result.status is Status.OK and collected.partial:
                    result.status, result.reason = Status.PARTIAL, collected.partial
                else:  # a crashed or stopped run keeps its status; what it lacked is a note
                    result.notes.extend(n for n in (collected.empty, collected.partial) if n)
                result.artifacts = {k: self._rel(p) for k, p in collected.artifacts.items()}
        if errors:
            result.status = Status.FAILED
            result.reason = errors[-1].strip().splitlines()[-1][:300]
            result.traceback = "\n".join(errors)
        return result

    def _overhead(self, outcome: Outcome) -> tuple[Overhead | None, str | None]:
        if self.options.repeat == 0:
            return None, NO_BASELINE
        steps = self.options.steps
        if steps is not None:
            base = [rundir.read_step_times(rundir.primary_dir(o.artifact_dir))
                    for o in self.baseline if o.record.exit.clean]
            own = rundir.read_step_times(rundir.primary_dir(outcome.artifact_dir))
            return assembly.step_overhead(base, own, steps.warmup, steps.measured,
                                          outcome.record.exit.clean)
        return assembly.overhead(self._clean_baseline_walls(), outcome.record.wall_s,
                                 outcome.record.exit.clean)

    def _findings(self, report: Report) -> list[Finding]:
        return self.plugins.findings(report)
