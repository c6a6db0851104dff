"""``perfstack analyze`` and ``perfstack merge``: reports from what was recorded elsewhere."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfstack import errors, signals
from perfstack.cli import outputs
from perfstack.cli.common import DEFAULT_RUNS_DIR, EXIT_BACKENDS_FAILED, EXIT_OK, Parser
from perfstack.cli.show import (
    add_view_options,
    check_view_options,
    output_width,
    print_report,
)
from perfstack.plugin.manager import Plugins
from perfstack.report import Report, Status


def write_report(plugins: Plugins, report: Report, ns: argparse.Namespace, what: str) -> int:
    """Write the report (``-o`` or a new run folder), print it, write ``--html`` (the options
    :func:`add_report_options` adds; ``what``: where the report came from, for its line)."""
    from perfstack.cli.history import remember
    from perfstack.report.files import save_report
    from perfstack.runfolder import rundir
    from perfstack.runfolder.filenames import REPORT_FILE

    if outputs.to_stdout(ns.output):
        return _to_stdout(plugins, report, ns, what)
    output: Path | None = ns.output
    run_dir = None
    if output is None:
        run_dir = rundir.new_run_dir(DEFAULT_RUNS_DIR)
        output = run_dir / REPORT_FILE
    with signals.deferred():
        save_report(report, output)
        remember(report, output)
    if signals.pending() is not None:  # postponed while writing: the report is whole
        print(f"report: {output}", file=sys.stderr)
        signals.raise_pending()
    if run_dir is not None:
        rundir.point_latest(run_dir)
    if not ns.quiet and ns.format == "text":
        print_report(report, plugins, top=ns.top, depth=ns.depth, full=ns.full,
                     all_frames=ns.all_frames, report_dir=output.parent.resolve())
    elif not ns.quiet:  # another format, printed as `perfstack show --format` prints it
        from perfstack.plugin.renderer import terminal_safe

        options = plugins.render_options(
            top=ns.top, depth=ns.depth, width=output_width(), full=ns.full,
            all_frames=ns.all_frames, report_dir=output.parent.resolve())
        try:
            text = plugins.renderers()[ns.format].render(report, options)
        finally:  # what a renderer left out is said, whether it drew or refused
            for notice in options.notices:
                print(f"perfstack: {terminal_safe(notice)}", file=sys.stderr)
        sys.stdout.write(terminal_safe(text) if ns.format == "markdown" else text)
    print(f"report: {output}  ({what})", file=sys.stderr)
    html = ns.html
    if html is not None:
        html_path = output.with_suffix(".html") if html in (True, "") else Path(html)
        outputs.write_html(plugins, report, output, html_path, ns.top, ns.depth)
        print(f"html: {html_path}", file=sys.stderr)
    return EXIT_OK


def _to_stdout(plugins: Plugins, report: Report, ns: argparse.Namespace, what: str) -> int:
    """``-o -``: the report's JSON on standard output, nothing else there; no run folder."""
    from perfstack.report.files import report_json

    with signals.deferred():  # a signal must not cut the JSON short
        sys.stdout.write(report_json(report))
        sys.stdout.flush()
    signals.raise_pending()
    print(f"report: standard output  ({what})", file=sys.stderr)
    if isinstance(ns.html, str) and ns.html:
        html_path = Path(ns.html)
        outputs.write_html(plugins, report, Path.cwd() / "report.json", html_path, ns.top, ns.depth)
        print(f"html: {html_path}", file=sys.stderr)
    return EXIT_OK


def _readers(plugins: Plugins) -> list[str]:
    """'name: description' of each backend that reads recorded files back."""
    from perfstack.plugin.backend import Backend

    return [f"{name}: {entry.backend.description}"
            for name, entry in sorted(plugins.backends()[0].items())
            if type(entry.backend).recognizes is not Backend.recognizes] or [
        "none (no installed backend reads recorded files)"]


def add_report_options(parser: Parser, plugins: Plugins) -> None:
    """The options of a command that makes a report without a run of its own: what to print,
    where to write it, the HTML beside it, and the view's options."""
    parser.add_argument("--format", default="text", choices=sorted(plugins.renderers()),
                        help="what to print (default: text; the JSON report is written "
                        "either way)")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help=f"report path (default: report.json in a new folder under "
                        f"{DEFAULT_RUNS_DIR}, which 'perfstack show' then reads; .gz compresses; "
                        "-: the report's JSON on standard output)")
    parser.add_argument("-q", "--quiet", action="store_true", help="do not print the report")
    parser.add_argument("--html", nargs="?", const=True, default=None, metavar="FILE",
                        help="also write the HTML report (default: beside the report)")
    add_view_options(parser)


def _outputs(ns: argparse.Namespace) -> list[tuple[str, Path | None]]:
    report = None if outputs.to_stdout(ns.output) else ns.output
    return [("-o", report), ("--html", outputs.html_beside(ns.html, ns.output))]


class _RankProgress:
    """'perfstack: read 5 of 16 ranks (3.1 s; about 6.8 s left)' on stderr, at most once a
    second, for a job of several ranks."""

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self, done: int, total: int, seconds: float) -> None:
        if total < 2 or (done < total and seconds - self.last < 1.0):
            return
        self.last = seconds
        left = f"; about {seconds * (total - done) / done:.0f} s left" if done < total else ""
        print(f"perfstack: read {done} of {total} ranks ({seconds:.1f} s{left})",
              file=sys.stderr, flush=True)


def cmd_analyze(plugins: Plugins, argv: list[str]) -> int:
    """Read recorded profiles into a report; write it and print it."""
    from perfstack.analysis.views.recorded import read_in_part
    from perfstack.cli.runargs import whole_number
    from perfstack.run.recorded import executors
    from perfstack.run.recorded.ingest import LEFT_OUT_RULE, UNREAD_RULE, analyze, expand
    from perfstack.runfolder import rundir

    parser = Parser(
        prog="perfstack analyze",
        description="Make a report from profiles recorded elsewhere, running nothing: the "
        "files of one process, or a folder of a job's per-rank files (from several nodes). "
        "The report has the same layers, findings and diff as a 'perfstack run' report. "
        "Files read: " + "; ".join(_readers(plugins)) + ".",
        epilog="example: perfstack analyze traces/ -o job.json --html")
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="trace files (.json, .json.gz) or folders of them")
    parser.add_argument("--jobs", type=whole_number(1), metavar="N",
                        help="read N ranks at once in local worker processes (default: the "
                        "usable CPUs, fewer when the memory available would not hold that "
                        "many; 1: in this process)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="read the ranks on a Dask cluster's workers (tcp://host:8786), "
                       "which must see the same files; default: $"
                       f"{executors.DASK_ADDRESS_ENV} when set (needs perfstack[dask])")
    where.add_argument("--scheduler-file", type=Path, metavar="FILE",
                       help="the Dask cluster whose scheduler wrote FILE "
                       "(dask scheduler --scheduler-file FILE)")
    add_report_options(parser, plugins)
    ns = parser.parse_args(argv)
    check_view_options(ns)
    cluster = executors.dask_address(ns.scheduler, ns.scheduler_file)
    if cluster is not None and ns.jobs is not None:
        raise errors.UsageError("--jobs sizes the local pool; a Dask cluster has its own "
                                "workers (leave out one of them)")
    named, found = expand(ns.paths)
    outputs.refuse_collisions(_outputs(ns), [("an input", p) for p in (*named, *found)])
    if ns.output is not None and not outputs.to_stdout(ns.output):
        rundir.check_writable(ns.output)
    report = analyze(ns.paths, plugins, jobs=ns.jobs, cluster=cluster, progress=_RankProgress(),
                     expanded=(named, found))
    files = len(report.run.analyzed or [])
    code = write_report(plugins, report, ns, f"analysed from {files} file{'s' * (files != 1)}")
    if not report.run.complete:
        print("perfstack: interrupted; the report is of the ranks read so far", file=sys.stderr)
        signals.note_interrupt()
        return signals.exit_code()
    failed = [b for b in report.backends if b.status == Status.FAILED]
    missed = [f for f in report.findings if f.rule in (LEFT_OUT_RULE, UNREAD_RULE)]
    if code == EXIT_OK and missed and not failed:
        # The report is of the files read; the exit code says that some were not.
        said = (f"{missed[0].title} ({missed[0].evidence[0]})" if missed[0].rule == UNREAD_RULE
                else missed[0].evidence[0])
        print(f"perfstack: {said}", file=sys.stderr)
        return EXIT_BACKENDS_FAILED
    if code == EXIT_OK and failed:
        # The report is written and says why; the exit code says that it is not whole.
        print(f"perfstack: the {failed[0].name} reader failed: {failed[0].reason}"
              + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""), file=sys.stderr)
        return EXIT_BACKENDS_FAILED
    partial = read_in_part(report.environment.get("recorded") or {})
    if code == EXIT_OK and partial:  # every rank read, some of them in part
        print(f"perfstack: {partial[0]}" + (f" (and {len(partial) - 1} more)"
                                            if len(partial) > 1 else ""), file=sys.stderr)
        return EXIT_BACKENDS_FAILED
    return code


def _node_reports(paths: list[Path]) -> list[Path]:
    """The reports named, and a folder's nodes' reports (each ``report.json`` below it, none
    in a hidden folder such as a node's ``.perfstack/runs`` history of runs, none through a
    ``latest`` link), in path order."""
    from perfstack.runfolder.filenames import REPORT_FILE

    out: list[Path] = []
    for path in paths:
        if not path.is_dir():
            out.append(path)
            continue
        found = sorted(p for p in path.rglob(REPORT_FILE)
                       if not any(part == "latest" or part.startswith(".")
                                  for part in p.relative_to(path).parts))
        if not found:
            raise errors.InputNotFound(f"{path}: no {REPORT_FILE} below this folder")
        out += found
    return out


def cmd_merge(plugins: Plugins, argv: list[str]) -> int:
    """Join the reports of one job's nodes into one report."""
    from perfstack.analysis.job.merge import merge, unmergeable
    from perfstack.report.files import load_report
    from perfstack.runfolder import rundir

    parser = Parser(
        prog="perfstack merge",
        description="Join the reports that 'perfstack run --nproc-per-node' wrote on each "
        "node of one multi-node job into one job report: every rank's rows and metrics, "
        "the slowest rank and the straggler gap across nodes.",
        epilog="example: perfstack merge node0/report.json node1/report.json -o job.json")
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT",
                        help="the nodes' report files, or a job folder holding them (each "
                        "node's report.json in a folder of its own, found at any depth)")
    parser.add_argument("--force", action="store_true",
                        help="join reports of different workloads (another script or other "
                        "arguments) anyway")
    add_report_options(parser, plugins)
    ns = parser.parse_args(argv)
    check_view_options(ns)
    ns.reports = _node_reports(ns.reports)
    if len(ns.reports) < 2:
        raise errors.UsageError("perfstack merge needs the reports of at least two nodes")
    outputs.refuse_collisions(_outputs(ns), [("an input report", p) for p in ns.reports])
    if ns.output is not None and not outputs.to_stdout(ns.output):
        rundir.check_writable(ns.output)
    nodes = [load_report(p) for p in ns.reports]
    refused = unmergeable(nodes, [str(p) for p in ns.reports], force=ns.force)
    if refused is not None:
        raise errors.UsageError(refused)
    into = (ns.output.parent if ns.output is not None and not outputs.to_stdout(ns.output)
            else Path.cwd() if outputs.to_stdout(ns.output) else None)
    report = merge(nodes, [str(p) for p in ns.reports], into)
    return write_report(plugins, report, ns, f"merged from {len(ns.reports)} reports")
