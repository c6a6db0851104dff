"""``perfstack sweep``: one ``perfstack run`` per combination of environment settings."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfstack import errors
from perfstack.cli.common import DEFAULT_RUNS_DIR, EXIT_OK, EXIT_WORKLOAD_FAILED
from perfstack.pluginmanager import Plugins
from perfstack.run import signals
from perfstack.run.filenames import REPORT_FILE


def cmd_sweep(plugins: Plugins, argv: list[str]) -> int:
    """Run the workload per setting; write each report and the sweep file; print the table."""
    from rich.console import Console

    from perfstack.cli.history import remember
    from perfstack.cli.progress import PlainProgress, TerminalProgress
    from perfstack.cli.run import (
        backend_options,
        describe_plan,
        distributed_options,
        require_baseline,
        select_backends,
        split_workload_args,
        workload_of,
    )
    from perfstack.cli.runargs import build_parser, step_window
    from perfstack.report.files import save_report, write_json_atomic
    from perfstack.run import rundir, sweep
    from perfstack.run.driver import Session
    from perfstack.run.options import RunOptions

    backends, _ = plugins.backends()
    own, workload_args = split_workload_args(argv)
    parser = build_parser(backends)
    parser.prog = "perfstack sweep"
    parser.description = ("Run the workload (and the chosen backends; default: those that "
                          "need no run of their own) "
                          "once per combination of --env settings; each gets an ordinary "
                          "report, and sweep.json compares them.")
    parser.epilog = ("example: perfstack sweep --env OMP_NUM_THREADS=1,2 "
                     "--env KMP_BLOCKTIME=0,1 workloads/resnet50.py")
    parser.add_argument("--env", dest="sweep_env", action="append", default=[],
                        metavar="NAME=V1,V2", help="a variable and its values (repeatable)")
    ns = parser.parse_args(own)
    if ns.quick:
        raise errors.UsageError("--quick is for one run's first answer; a sweep compares "
                                "settings by their baselines (use --repeat 1 to shorten it)")
    require_baseline(ns, "sweep")
    settings = sweep.parse_settings(ns.sweep_env)
    workload = workload_of(ns, workload_args)
    if ns.plugins is None:  # the backends that read the runs made anyway: they cost nothing
        ns.plugins = ",".join(sorted(name for name, e in backends.items()
                                     if not e.backend.own_run and not e.backend.opt_in)) or None
    selected = select_backends(ns, backends) if ns.plugins else []
    distributed = distributed_options(ns, own, backends)
    if ns.job_dir is not None:
        raise errors.UsageError("--job-dir is perfstack run's: a sweep writes one report")
    if ns.output is not None:
        rundir.check_writable(ns.output)
    combos = sweep.combinations(settings)
    if ns.dry_run:
        print(f"perfstack would sweep {len(combos)} settings: " + "; ".join(
            ", ".join(f"{k}={v}" for k, v in env.items()) for env in combos))
        for line in describe_plan(workload, selected, ns.repeat, ns.warmup,
                                  ns.nproc_per_node, backend_options(ns, selected)):
            print(line)
        return EXIT_OK
    base = rundir.use_out_dir(ns.out_dir) if ns.out_dir is not None else \
        rundir.new_run_dir(DEFAULT_RUNS_DIR)
    sweep_path: Path = ns.output if ns.output is not None else base / "sweep.json"
    err = Console(stderr=True, highlight=False)
    entries: list[dict[str, Any]] = []
    interrupted = False
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")

    def document(complete: bool) -> dict[str, Any]:
        return sweep.document(started, workload.command(), settings, entries, complete)

    for i, env in enumerate(combos, 1):
        try:
            label = ", ".join(f"{k}={v}" for k, v in env.items())
            err.print(f"[bold]setting {i}/{len(combos)}[/bold]: {label}")
            run_dir = base / sweep.slug(env)
            run_dir.mkdir(parents=True, exist_ok=True)
            progress = TerminalProgress(err) if err.is_terminal else PlainProgress()
            options = RunOptions(repeat=ns.repeat, warmup=ns.warmup, timeout_s=ns.timeout,
                                 kill_grace_s=ns.kill_grace,
                                 collect_timeout_s=ns.collect_timeout,
                                 backend_options=backend_options(ns, selected),
                                 steps=step_window(ns), keep_going=ns.keep_going,
                                 **distributed)
            report_path = run_dir / REPORT_FILE
            with sweep.environment(env):
                session = Session(workload, selected, plugins, run_dir,
                                  report_path.parent.resolve(), options, progress)
                report = session.execute()
        except KeyboardInterrupt:  # between settings (Ctrl-C, TERM, HUP): keep what is done
            interrupted = True
            break
        with signals.deferred():  # the report and the sweep so far, whole, after every setting
            save_report(report, report_path)
            remember(report, report_path)
            rel = os.path.relpath(report_path.resolve(), sweep_path.parent.resolve())
            entries.append(sweep.summarize_setting(env, report, rel,
                                                   processes=ns.nproc_per_node or 1))
            interrupted = not report.run.complete
            write_json_atomic(sweep_path, document(complete=False))
        if interrupted or signals.pending() is not None:
            interrupted = True
            break
    doc = document(complete=not interrupted)
    with signals.deferred():
        write_json_atomic(sweep_path, doc)
    if ns.out_dir is None:
        rundir.point_latest(base)
    if not ns.quiet:
        sys.stdout.write(sweep.render(doc))
    print(f"sweep: {sweep_path}  (reports: {base})", file=sys.stderr)
    if interrupted:
        signals.note_interrupt()
        return signals.exit_code()
    if any(e["status"] != "ok" for e in entries):
        return EXIT_WORKLOAD_FAILED
    return EXIT_OK
