"""``perfstack sweep``: one ``perfstack run`` per combination of environment settings."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfstack import errors, signals
from perfstack.cli.common import EXIT_OK, EXIT_WORKLOAD_FAILED, Parser
from perfstack.plugin.manager import BackendEntry, Plugins
from perfstack.runfolder.filenames import REPORT_FILE


def cmd_sweep(plugins: Plugins, argv: list[str]) -> int:
    """Run the workload per setting; write each report and the sweep file; print the table."""
    from perfstack.cli.history import remember
    from perfstack.cli.session import prepare, split_workload_args, workload_of
    from perfstack.report.files import save_report, write_json_atomic
    from perfstack.run.compare import sweep
    from perfstack.runfolder import rundir

    backends = plugins.backends()[0]
    own, workload_args = split_workload_args(argv)
    ns = _parser(backends).parse_args(own)
    if ns.quick:
        raise errors.UsageError("--quick is for one run's first answer; a sweep compares "
                                "settings by their baselines (use --repeat 1 to shorten it)")
    if ns.plugins is None:  # the backends that read the runs made anyway: they cost nothing
        ns.plugins = ",".join(sorted(name for name, e in backends.items()
                                     if not e.backend.own_run and not e.backend.opt_in)) or None
    prepared = prepare(plugins, ns, own, "sweep")
    settings = sweep.parse_settings(ns.sweep_env)
    workload = workload_of(ns, workload_args)
    if ns.job_dir is not None:
        raise errors.UsageError("--job-dir is perfstack run's: a sweep writes one report")
    if ns.output is not None:
        rundir.check_writable(ns.output)
    combos = sweep.combinations(settings)
    if ns.dry_run:
        print(f"perfstack would sweep {len(combos)} settings: " + "; ".join(
            ", ".join(f"{k}={v}" for k, v in env.items()) for env in combos))
        for line in prepared.plan(workload):
            print(line)
        return EXIT_OK
    base = prepared.run_folder()
    sweep_path: Path = ns.output if ns.output is not None else base / "sweep.json"
    entries: list[dict[str, Any]] = []
    interrupted = False
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")

    def document(complete: bool) -> dict[str, Any]:
        return sweep.document(started, workload.command(), settings, entries, complete)

    for i, env in enumerate(combos, 1):
        try:
            label = ", ".join(f"{k}={v}" for k, v in env.items())
            prepared.err.print(f"[bold]setting {i}/{len(combos)}[/bold]: {label}")
            run_dir = base / sweep.slug(env)
            run_dir.mkdir(parents=True, exist_ok=True)
            report_path = run_dir / REPORT_FILE
            with sweep.environment(env):
                report = prepared.session(workload, run_dir,
                                          report_path.parent.resolve()).execute()
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


def _parser(backends: dict[str, BackendEntry]) -> Parser:
    """The parser of ``perfstack sweep``: ``perfstack run``'s, and ``--env``."""
    from perfstack.cli.runargs import build_parser

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
    return parser
