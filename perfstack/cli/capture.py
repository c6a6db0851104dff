"""``perfstack capture RUN|PID --steps N``: N steps of a job ``perfstack run --on-demand``
started, recorded while it runs on."""

from __future__ import annotations

import sys

from perfstack.cli import outputs
from perfstack.cli.analyze import add_report_options, write_report
from perfstack.cli.attach import SHARED_FLAGS, backends_said, options_of
from perfstack.cli.common import DEFAULT_RUNS_DIR, Parser
from perfstack.cli.runargs import add_backend_options, seconds, whole_number
from perfstack.cli.show import check_view_options
from perfstack.plugin.manager import Plugins


def cmd_capture(plugins: Plugins, argv: list[str]) -> int:
    """Record N steps of an armed job; write the capture's report and print it."""
    from perfstack.run import attached, capturing
    from perfstack.runfolder.filenames import REPORT_FILE

    backends = plugins.backends()[0]
    live = {n: e for n, e in backends.items() if e.backend.live}
    parser = Parser(
        prog="perfstack capture",
        description="Record the next N steps of a job started with 'perfstack run "
        "--on-demand', while it runs on: the backends armed inside it (torch.profiler) and "
        "those that sample it from outside (" + (", ".join(sorted(live)) or "none") + "), "
        "into one report in the run folder. As many captures as asked, one at a time.",
        epilog="example: perfstack capture .perfstack/runs/latest --steps 20 --html")
    parser.add_argument("target", metavar="RUN|PID",
                        help="the on-demand run's folder (printed when it started), or its "
                        "workload's pid")
    parser.add_argument("--steps", type=whole_number(1), default=10, metavar="N",
                        help="steps to record (default: 10)")
    parser.add_argument("--plugins", metavar="A,B",
                        help="samplers to attach from outside (default: every one that can; "
                        "'none': only what is armed inside the job)")
    parser.add_argument("--ranks", default="all", metavar="all|0,3",
                        help="a torchrun job's ranks to capture, together (default: all)")
    parser.add_argument("--timeout", type=seconds, default=600.0, metavar="S",
                        help="give up when the job has begun no step in S seconds "
                        "(default: 600)")
    for flag, words in SHARED_FLAGS:
        parser.add_argument(f"--{flag}", dest=f"shared_{flag}", action="store_true",
                            help=words)
    add_report_options(parser, plugins)
    add_backend_options(parser, live)
    ns = parser.parse_args(argv)
    check_view_options(ns)
    named = ([] if ns.plugins == "none" else
             [n.strip() for n in ns.plugins.split(",") if n.strip()]
             if ns.plugins is not None else None)
    chosen = attached.live_backends(backends, named)
    armed = capturing.find_armed(ns.target, DEFAULT_RUNS_DIR, ns.ranks)
    pid = armed[0].pid
    who = (f"process {pid}" if armed[0].rank is None else
           f"rank{'s' * (len(armed) > 1)} {', '.join(str(a.rank) for a in armed)}")
    print(f"perfstack: capturing {ns.steps} steps of {who} (armed in {armed[0].folder}) at "
          "its next step; the job runs on", file=sys.stderr, flush=True)
    elsewhere = (ns.output.parent.resolve() if ns.output is not None
                 and not outputs.to_stdout(ns.output) else None)
    report, where = capturing.capture(plugins, armed, ns.steps, chosen,
                                      options_of(ns, chosen), ns.timeout, elsewhere)
    if ns.output is None:
        ns.output = where / REPORT_FILE
    code = write_report(plugins, report, ns, f"capture {where.name} of {who}, "
                        f"{report.environment['capture'].get('steps')} steps")
    return backends_said(report, code)
