"""``perfstack attach PID``: a report of a process perfstack did not start, measured from
outside for a while; the process runs on."""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import Any

from perfstack import errors, signals
from perfstack.cli import outputs
from perfstack.cli.analyze import add_report_options, write_report
from perfstack.cli.common import DEFAULT_RUNS_DIR, EXIT_BACKENDS_FAILED, EXIT_OK, Parser
from perfstack.cli.runargs import add_backend_options, option_dest, seconds
from perfstack.cli.show import check_view_options
from perfstack.plugin.manager import BackendEntry, Plugins
from perfstack.report import Report, Status

#: Options named the same in several backends, given once (``--native`` sets every
#: attaching backend's ``native``).
SHARED_FLAGS = (("subprocesses", "also measure the process's children"),
                ("native", "also sample native frames (C/C++ below Python): the sampler "
                 "then pauses the process for each sample"),
                ("idle", "include idle (waiting) threads"))


def _pid(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a process id")
    return int(text)


def options_of(ns: argparse.Namespace, chosen: list[BackendEntry]) -> dict[str, dict[str, Any]]:
    """Each chosen backend's options; a shared flag (``--native``) set in each having it."""
    out: dict[str, dict[str, Any]] = {}
    for entry in chosen:
        name = entry.backend.name
        mine = {o.name: getattr(ns, option_dest(name, o.name)) for o in entry.backend.options}
        for flag, _ in SHARED_FLAGS:
            if getattr(ns, f"shared_{flag}") and flag in mine:
                mine[flag] = True
        out[name] = mine
    return out


def cmd_attach(plugins: Plugins, argv: list[str]) -> int:
    """Measure a running process for a while; write its report and print it."""
    from perfstack.run import attached
    from perfstack.runfolder import rundir
    from perfstack.runfolder.filenames import REPORT_FILE

    backends = plugins.backends()[0]
    able = [n for n, e in sorted(backends.items()) if e.backend.live]
    parser = Parser(
        prog="perfstack attach",
        description="Measure a Python process that is already running (perfstack did not "
        "start it) for a while, and report it as a run is reported: where its time goes, "
        "its hottest functions, its threads. Nothing is restarted or stopped: the process "
        "runs on, also after Ctrl-C. Without a run of its own there is no baseline: the "
        "profiler's overhead and the unprofiled speed are unknown. Backends that attach: "
        + (", ".join(able) or "none installed") + ".",
        epilog="example: perfstack attach 4242 --duration 30 --html")
    parser.add_argument("pid", type=_pid, metavar="PID", help="the process to measure")
    parser.add_argument("--duration", type=seconds, default=10.0, metavar="S",
                        help="seconds to measure (default: 10); Ctrl-C ends it sooner, "
                        "with a report of what was measured")
    parser.add_argument("--plugins", metavar="A,B",
                        help="backends to attach with (default: every one that can)")
    for flag, words in SHARED_FLAGS:
        parser.add_argument(f"--{flag}", dest=f"shared_{flag}", action="store_true",
                            help=words)
    add_report_options(parser, plugins)
    add_backend_options(parser, {n: e for n, e in backends.items() if e.backend.live})
    ns = parser.parse_args(argv)
    check_view_options(ns)
    named = ([n.strip() for n in ns.plugins.split(",") if n.strip()]
             if ns.plugins is not None else None)
    chosen = attached.live_backends(backends, named)
    if not chosen:
        raise errors.UsageError("no installed backend can attach to a running process "
                                "('perfstack plugins' lists them)")
    report_targets = [("-o", None if outputs.to_stdout(ns.output) else ns.output),
                      ("--html", outputs.html_beside(ns.html, ns.output))]
    outputs.refuse_collisions(report_targets, [])
    if ns.output is not None and not outputs.to_stdout(ns.output):
        rundir.check_writable(ns.output)
    target = attached.checked(ns.pid)
    run_dir = rundir.new_run_dir(DEFAULT_RUNS_DIR)
    print(f"perfstack: measuring process {ns.pid} for {ns.duration:g} s with "
          f"{', '.join(e.backend.name for e in chosen)} (Ctrl-C ends it sooner; the process "
          "runs on)", file=sys.stderr, flush=True)
    try:
        written = (ns.output if ns.output is not None and not outputs.to_stdout(ns.output)
                   else run_dir / REPORT_FILE)
        report = attached.attach_session(plugins, target, chosen, options_of(ns, chosen),
                                         ns.duration, run_dir, written.parent.resolve())
    except errors.PerfstackError:  # refused before anything was measured: no empty folder
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    if ns.output is None:
        ns.output = run_dir / REPORT_FILE
    code = write_report(plugins, report, ns, f"process {ns.pid}, measured "
                        f"{report.run.duration_s:.1f} s")
    if ns.output == run_dir / REPORT_FILE:
        rundir.point_latest(run_dir)
    if not report.run.complete:
        print(f"perfstack: interrupted; process {ns.pid} runs on, the report is of what was "
              "measured", file=sys.stderr)
        signals.note_interrupt()
        return signals.exit_code()
    return backends_said(report, code)


def backends_said(report: Report, code: int) -> int:
    """The exit code of a report written with ``code``: the backends-failed one, said in a
    line, where a backend could not measure (failed, or unavailable here)."""
    failed = [b for b in report.backends if b.status in (Status.FAILED, Status.UNAVAILABLE)]
    if code == EXIT_OK and failed:
        print(f"perfstack: the {failed[0].name} backend {failed[0].status.value}: "
              f"{failed[0].reason}" + (f" (and {len(failed) - 1} more)" if len(failed) > 1
                                       else ""), file=sys.stderr)
        return EXIT_BACKENDS_FAILED
    return code

