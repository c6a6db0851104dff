"""Making the session's runs: each one child process through the bootstrap, its record kept,
its progress line said ("run 4 of 10, torch: exit 0").

The :class:`Runner` owns what the runs leave: their records, the baseline's outcomes, the
processes a run left behind, whether the user interrupted. ``perfstack.run.child.launch`` builds a
run's command line and environment; ``perfstack.run.child.process`` supervises the child.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from perfstack.plugin.backend import InProcessHook, Launch, Outcome, Workload
from perfstack.records import replace
from perfstack.report import Quantity, RunRecord
from perfstack.run import baseline as baselines
from perfstack.run.child import launch as launching
from perfstack.run.child.process import ChildSpec, run_child
from perfstack.run.options import EstimatingProgress, Progress, RunOptions, selected_ranks
from perfstack.runfolder import rundir

#: Called with a run's pid as it starts (once per run, or per rank under torchrun).
OnStarted = Callable[[int], None]
#: Called with a rank's number, its folder and its pid as that rank starts.
OnRankStarted = Callable[[int, Path, int], None]


class Runner:
    """The runs of one session, made one at a time."""

    def __init__(self, workload: Workload, cwd: str, run_dir: Path, report_dir: Path,
                 options: RunOptions, progress: Progress, planned: int,
                 riders: list[InProcessHook] | None = None) -> None:
        self.workload = workload
        self.cwd = cwd
        self.run_dir = run_dir
        self.report_dir = report_dir  # artifact paths in the records are relative to it
        self.options = options
        self.progress = progress
        #: runs the session will make, as planned; lowered when a backend's runs are dropped
        self.planned = planned
        self.done = 0
        self.records: list[RunRecord] = []
        self.baseline: list[Outcome] = []
        self.warmups: list[Outcome] = []  # the warm-up runs before the baseline
        self.left_running: list[tuple[str, list[str]]] = []  # (run id, processes stopped)
        self.interrupted = False
        #: in-process hooks loaded in every run (``Backend.rider``)
        self.riders = list(riders or [])

    def run(self, label: str, role: str, backend: str | None, launch: Launch,
            on_started: OnStarted | None = None, python: str | None = None,
            on_rank_started: OnRankStarted | None = None, in_plan: bool = False,
            workload: Workload | None = None) -> Outcome:
        """Make one run (a child of its own, through the bootstrap) and record it
        (``workload``: the session's, or this run's own arguments of it)."""
        folder = rundir.run_subfolder(self.run_dir, label)
        options = self.options
        if self.riders:
            launch = replace(launch, inprocess=[*launch.inprocess, *self.riders])
        config = launching.write_config(folder, launch, role, options.steps)
        nproc = options.nproc_per_node
        argv = launching.child_argv(workload or self.workload, launch, folder, python, nproc,
                                    options.torchrun_args)
        env = launching.child_env(launch, config, python, self.run_dir)
        spec = ChildSpec(argv, env, self.cwd, folder, options.timeout_s, options.kill_grace_s,
                         count_instructions=role in ("warmup", "baseline"))
        self.done += 1
        counted = role != "extra" or in_plan  # a run the progress counts ("run 5 of 9")
        self.progress.begin(self._line(label) if counted else label)
        if isinstance(self.progress, EstimatingProgress):
            walls = baselines.clean_walls(self.baseline)
            self.progress.estimate(statistics.median(walls) if walls and counted else None,
                                   max(self.planned, self.done) - self.done)
        on_tick: Callable[[float], None] = self.progress.tick
        windowed = options.steps is not None and options.steps.warmup > 0
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
        record.probe = rundir.RunFolder(folder).probe()
        if spec.count_instructions:
            record.instructions = Quantity(result.instructions, "count",
                                           result.instructions_reason)
        self.records.append(record)
        if result.left_running:
            self.left_running.append((label, result.left_running))
        self.progress.end(self._line(label) if counted else label, record.exit.describe())
        if record.exit.status == "interrupted":
            self.interrupted = True
        return launching.outcome_of(record, folder, result, bool(nproc))

    def _line(self, label: str) -> str:
        return f"run {self.done} of {max(self.planned, self.done)}, {label}"

    def extra_runner(self, backend: str) -> Callable[..., Outcome]:
        """The ``ctx.run_extra`` a backend gets: one more run of its own, recorded."""
        def run_extra(label: str, *, env: dict[str, str] | None = None,
                      python: str | None = None, args: Sequence[str] | None = None,
                      inprocess: Sequence[InProcessHook] = ()) -> Outcome:
            if self.interrupted:
                raise KeyboardInterrupt
            launch = Launch(env=dict(env or {}), inprocess=list(inprocess))
            workload = self.workload if args is None else replace(self.workload,
                                                                 args=list(args))
            return self.run(f"{backend}/{label}", "extra", backend, launch, python=python,
                            workload=workload)
        return run_extra

    def ranks(self, folder: Path | None = None) -> list[int]:
        """The selected ranks among those that ran on this node (in ``folder``, else in the
        first baseline run)."""
        if not self.options.nproc_per_node:
            return []
        if folder is None:
            folder = self.baseline[0].artifact_dir if self.baseline else None
        present = rundir.RunFolder(folder).ranks() if folder is not None else []
        return selected_ranks(self.options.ranks, present)
