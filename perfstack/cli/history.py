"""``perfstack history``: the runs remembered, a metric's or a row's series; ``history add``."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfstack import errors
from perfstack.cli.common import DEFAULT_RUNS_DIR, EXIT_OK, Parser
from perfstack.report import Report

if TYPE_CHECKING:  # the history module itself is imported when it is used
    from perfstack.history import Location

DB_HELP = ("the history: a file, or a PostgreSQL URL postgresql://USER:PASSWORD@HOST:PORT/DB "
           "(default: $PERFSTACK_HISTORY, else .perfstack/history.sqlite)")


def database(given: str | None) -> Location:
    """Return the history database: ``--db`` (a path or a PostgreSQL URL), else
    PERFSTACK_HISTORY, else ``.perfstack/history.sqlite``."""
    from perfstack import history
    from perfstack.history.location import is_url

    if given is not None:
        return given if is_url(given) else Path(given)
    found = history.default_path(DEFAULT_RUNS_DIR)
    if found is None:
        raise errors.UsageError(f"{history.HISTORY_ENV} is off: name a database with --db")
    return found


def remember(report: Report, report_path: Path) -> None:
    """Add a report a command has just written to the history (never fails the command: a
    history that cannot be written is one line on stderr)."""
    from perfstack import history
    from perfstack.history import location as historydb

    path = history.default_path(DEFAULT_RUNS_DIR)
    if path is None:
        return
    try:
        history.add(path, report, report_path)
    except Exception as exc:
        # The database's errors are known once it has been opened (PostgreSQL's driver is
        # imported only for a URL), so they are asked for here, not before.
        if not isinstance(exc, (*historydb.errors(), errors.NewerHistory, errors.UsageError)):
            raise
        print(f"perfstack: warning: the run was not added to the history "
              f"{historydb.describe(path)}: {exc}", file=sys.stderr)


def _table(rows: list[dict[str, Any]], fmt: str, columns: list[str]) -> str:
    if fmt == "json":
        return json.dumps(rows, indent=1) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore",
                                lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_cell(" ".join(v) if isinstance(v, list) else v)
                             for k, v in row.items()})
        return out.getvalue()
    from perfstack.plugin.renderer import terminal_safe

    # A workload's names (its command, a series) reach the terminal: escapes shown, not acted on.
    rows = [{c: terminal_safe(_cell(r.get(c))) for c in columns} for r in rows]
    widths = {c: max([len(c), *(len(r[c]) for r in rows)]) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns).rstrip()]
    lines += ["  ".join(r[c].ljust(widths[c]) for c in columns).rstrip() for r in rows]
    from perfstack.cli.show import output_width

    width = output_width()  # the last column (the command) gives way first
    return "\n".join(line if len(line) <= width else line[:width - 1] + "…"
                     for line in lines) + "\n"


#: What a spreadsheet reads as the start of a formula (OWASP's list for CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    """Return a CSV cell a spreadsheet shows as text: a string that would start a formula
    (``=HYPERLINK(...)``) gets a leading apostrophe, as OWASP advises; numbers stay numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "dirty" if value else "clean"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)


def cmd_history(argv: list[str]) -> int:
    """List the runs in the history, print a series, or add reports."""
    from perfstack.history import location as historydb

    # What it prints is written once the history has been read: a full or closed stdout is
    # then an output error (exit 7), not the history's.
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            code = _history(argv)
        except historydb.errors() as exc:
            raise errors.HistoryUnavailable(f"cannot use the history: {exc}") from None
    sys.stdout.write(out.getvalue())
    return code


def _history(argv: list[str]) -> int:
    from perfstack import history
    from perfstack.history import location as historydb
    from perfstack.report.files import load_report

    if argv[:1] == ["add"]:
        parser = Parser(prog="perfstack history add",
                        description="Add reports written earlier to the history.")
        parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT")
        parser.add_argument("--db", metavar="FILE|URL", help=DB_HELP)
        ns = parser.parse_args(argv[1:])
        path = database(ns.db)
        loaded = [(p, load_report(p)) for p in ns.reports]  # every file checked first
        added = sum(history.add(path, report, p) for p, report in loaded)
        print(f"added {added} of {len(loaded)} report(s) to {historydb.describe(path)}"
              + (" (the others were there already)" if added < len(loaded) else ""),
              file=sys.stderr)
        return EXIT_OK
    parser = Parser(prog="perfstack history",
                    description="The runs in the history (every run, analyze and sweep adds "
                    "its reports), or one metric's or row's series over them.",
                    epilog="examples: perfstack history --workload train.py | perfstack "
                    "history --metric wall_time --format csv | perfstack history add "
                    "old/report.json")
    parser.add_argument("--workload", metavar="TEXT",
                        help="runs whose command contains TEXT (or whose workload id is TEXT)")
    parser.add_argument("--branch", help="runs on this git branch")
    parser.add_argument("--machine", metavar="ID", help="runs on this machine (its id)")
    parser.add_argument("--since", metavar="DATE", help="runs started on or after DATE "
                        "(ISO: 2026-11-01)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--metric", metavar="NAME", help="this metric's series")
    which.add_argument("--row", metavar="KEY", help="this row's series (its primary value)")
    parser.add_argument("--format", choices=("text", "json", "csv"), default="text")
    parser.add_argument("--db", metavar="FILE|URL", help=DB_HELP)
    ns = parser.parse_args(argv)
    path = database(ns.db)
    if not historydb.exists(path):
        raise errors.InputNotFound(f"{path}: no history yet ('perfstack run' writes it; "
                                   "'perfstack history add REPORT' adds old reports)")
    filters = {"workload": ns.workload, "branch": ns.branch, "machine": ns.machine,
               "since": ns.since}
    if ns.metric or ns.row:
        points = history.series(path, metric=ns.metric, row=ns.row, **filters)
        rows = [p.to_dict() for p in points]
        sys.stdout.write(_table(rows, ns.format, ["run", "started", "commit", "value",
                                                  "unit"]))
        return EXIT_OK
    entries = history.runs(path, **filters)
    rows = [e.to_dict() for e in entries]
    if ns.format == "text":  # short forms, to fit 80 columns; json and csv keep everything
        from perfstack.report.units import fmt_seconds

        for row in rows:
            row["commit"] = (row["commit"] or "")[:10] or None
            row["state"] = row.pop("dirty")
            row["started"] = str(row["started"])[:16].replace("T", " ")
            row["machine"] = str(row["machine"])[:8]
            wall = row.pop("wall_time")
            row["wall"] = fmt_seconds(wall) if isinstance(wall, (int, float)) else None
        columns = ["id", "started", "commit", "branch", "state", "machine", "wall",
                   "workload"]
    else:
        columns = ["id", "started", "commit", "branch", "dirty", "machine", "wall_time",
                   "report", "workload"]
    sys.stdout.write(_table(rows, ns.format, columns))
    return EXIT_OK
