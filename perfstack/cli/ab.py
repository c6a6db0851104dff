"""``perfstack ab``: compare two versions of a workload in one session, runs interleaved."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from perfstack import errors, signals
from perfstack.cli import outputs
from perfstack.cli.common import DEFAULT_RUNS_DIR, EXIT_OK, EXIT_WORKLOAD_FAILED, Parser
from perfstack.plugin.manager import Plugins
from perfstack.runfolder.filenames import REPORT_FILE

if TYPE_CHECKING:
    from perfstack.run.driver import Session

DEFAULT_PAIRS = 7


def cmd_ab(plugins: Plugins, argv: list[str]) -> int:
    """Run two scripts (or one at two revisions) interleaved; print their diff; exit as diff."""
    from perfstack.analysis.diff import diff
    from perfstack.cli.diff import emit
    from perfstack.cli.session import prepare, split_workload_args
    from perfstack.plugin.backend import Workload
    from perfstack.report.files import save_report
    from perfstack.run.compare import ab
    from perfstack.runfolder import rundir

    own, workload_args = split_workload_args(argv)
    ns = _parser(plugins).parse_args(own)
    prepared = prepare(plugins, ns, own, "ab")
    if ns.rev and (len(ns.rev) != 2 or len(ns.scripts) != 1):
        raise errors.UsageError("--rev takes two revisions (BASE and NEW) and one script")
    if not ns.rev and len(ns.scripts) != 2:
        raise errors.UsageError("name two scripts (BASE.py NEW.py), or one script with "
                                "--rev BASE --rev NEW")
    if ns.top < 1:
        raise errors.UsageError(f"--top must be at least 1, got {ns.top}")
    if ns.output is not None:
        rundir.check_writable(ns.output)
    for script in ns.scripts:
        if not Path(script).is_file():
            raise errors.InputNotFound(f"{script}: no such file")
    outputs.refuse_collisions([("-o", ns.output)],
                              [("a workload script", Path(s)) for s in ns.scripts])
    if ns.dry_run:
        sides = list(ns.scripts)
        if ns.rev:
            _, commits = ab.resolve_revisions(Path(ns.scripts[0]), (ns.rev[0], ns.rev[1]))
            sides = [f"{ns.scripts[0]} at {rev} ({commit[:10]})"
                     for rev, commit in zip(ns.rev, commits, strict=True)]
        print(f"perfstack would compare {sides[0]} (base) with {sides[1]} (new): "
              f"{ns.repeat} baseline runs a side, interleaved, after {ns.warmup} warm-up run(s)")
        for line in prepared.plan(Workload(ns.scripts[-1], workload_args))[3:]:
            print(line + " per side" if line.endswith((" run", " runs")) else line)
        return EXIT_OK
    run_dir = prepared.run_folder()

    def session(side: str, checkout: ab.Checkout) -> Session:
        folder = run_dir / side
        folder.mkdir(parents=True, exist_ok=True)
        # Each line says its side: the two sessions' runs interleave.
        return prepared.session(Workload(str(checkout.script), workload_args), folder,
                                folder.resolve(), side=side, cwd=str(checkout.cwd))

    if ns.rev:
        with ab.revisions(Path(ns.scripts[0]), (ns.rev[0], ns.rev[1])) as (one, two):
            labels = (one.label, two.label)
            reports = ab.run_interleaved(session("base", one), session("new", two),
                                         ns.repeat, ns.warmup)
    else:
        here = Path.cwd()
        labels = (ns.scripts[0], ns.scripts[1])
        reports = ab.run_interleaved(
            session("base", ab.Checkout(ns.scripts[0], Path(ns.scripts[0]), here)),
            session("new", ab.Checkout(ns.scripts[1], Path(ns.scripts[1]), here)),
            ns.repeat, ns.warmup)
    for side, report in zip(ab.SIDES, reports, strict=True):
        save_report(report, run_dir / side / REPORT_FILE)
    print(f"reports: {run_dir / 'base' / 'report.json'} and {run_dir / 'new' / 'report.json'}",
          file=sys.stderr)
    code = emit(diff(*reports, labels[0], labels[1]), ns.format, ns.top,
                ns.fail_on_regression, ns.output, plugins)
    if not all(r.run.complete for r in reports):
        print("perfstack: interrupted; the comparison above is partial", file=sys.stderr)
        signals.note_interrupt()
        return signals.exit_code()
    if any(not rec.exit.clean for r in reports for rec in r.run.runs if rec.role != "extra"):
        print("perfstack: the workload did not finish cleanly in every run", file=sys.stderr)
        return EXIT_WORKLOAD_FAILED
    return code


def _parser(plugins: Plugins) -> Parser:
    """The parser of ``perfstack ab``: its scripts or revisions, the diff's options and a
    session's."""
    from perfstack.cli.common import percentage
    from perfstack.cli.diff import diff_formats
    from perfstack.cli.runargs import add_session_options

    parser = Parser(
        prog="perfstack ab",
        description="Compare two versions of a workload on a noisy machine: their baseline runs "
        "interleaved in one session (A B B A ...) and judged with a paired test, then each "
        "side's backends once. Prints the diff; both reports stay in the run folder.",
        epilog="examples: perfstack ab old.py new.py -- --steps 50 | "
        "perfstack ab --rev main --rev HEAD train.py --fail-on-regression 5%")
    parser.add_argument("scripts", nargs="+", metavar="SCRIPT",
                        help="BASE.py NEW.py, or with --rev one script")
    parser.add_argument("--rev", action="append", default=[], metavar="REV",
                        help="a git revision (twice: BASE then NEW) to check the script's "
                        "repository out at, in temporary worktrees")
    parser.add_argument("--format", choices=diff_formats(plugins), default="text")
    parser.add_argument("--fail-on-regression", type=percentage, metavar="PCT",
                        help="exit 1 when a metric regressed significantly by more than PCT")
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="rows per layer in the diff (default: 10)")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="write the diff to FILE instead of stdout")
    parser.add_argument("--out-dir", type=Path, metavar="DIR",
                        help=f"run folder (default: {DEFAULT_RUNS_DIR}/<timestamp>); the two "
                        "reports are base/report.json and new/report.json in it")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the arguments and say which runs would be made; run nothing")
    add_session_options(parser, plugins.backends()[0])
    parser.set_defaults(repeat=DEFAULT_PAIRS)
    return parser
