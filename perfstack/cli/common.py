"""What every command of the ``perfstack`` command line shares: its exit codes, the folder of
runs, and the argument parser whose usage error is one line.

Exit codes (also in the README):

====  ==========================================================================
0     success
1     ``diff --fail-on-regression``, ``gate``: a significant regression
2     usage error: an unknown option, a value out of range (negative timeout...)
3     a file named on the command line does not exist (script, module, report)
4     not a perfstack report: not JSON, another tool's JSON, or fails the schema
5     a perfstack report of a schema version this perfstack cannot read
6     unknown plugin name
7     the report or run folder cannot be written
8     the workload did not finish cleanly in some run (the report was written)
9     every backend named with --plugins failed (the report was written)
10    the history cannot be opened or read
11    a package the command needs is missing
12    ``gate``: the newest run was disturbed by other programs; it cannot be judged
13    ``analyze --scheduler``: the Dask scheduler cannot be reached
70    internal error in perfstack (the traceback is saved to a file, not printed)
130   interrupted by Ctrl-C (a partial report was written)
====  ==========================================================================
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NoReturn

from perfstack import errors

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_NOT_A_REPORT = 4
EXIT_VERSION = 5
EXIT_UNKNOWN_PLUGIN = 6
EXIT_OUTPUT = 7
EXIT_WORKLOAD_FAILED = 8
EXIT_BACKENDS_FAILED = 9
EXIT_HISTORY = 10
EXIT_MISSING_DEPENDENCY = 11
#: perfstack gate: the newest run was disturbed by other programs; run it again
EXIT_DISTURBED = 12
#: analyze --scheduler: the Dask scheduler cannot be reached
EXIT_CLUSTER = 13
#: ``perfstack attach``: the kernel refuses to let perfstack look into the process named
EXIT_ATTACH = 14
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

EXIT_CODES: dict[type[errors.PerfstackError], int] = {
    errors.UsageError: EXIT_USAGE,
    errors.InputNotFound: EXIT_NOT_FOUND,
    errors.NotAReport: EXIT_NOT_A_REPORT,
    errors.UnsupportedVersion: EXIT_VERSION,
    errors.NewerHistory: EXIT_VERSION,
    errors.UnknownPlugin: EXIT_UNKNOWN_PLUGIN,
    errors.PluginModuleNotFound: EXIT_UNKNOWN_PLUGIN,
    errors.OutputError: EXIT_OUTPUT,
    errors.HistoryUnavailable: EXIT_HISTORY,
    errors.MissingDependency: EXIT_MISSING_DEPENDENCY,
    errors.ClusterUnavailable: EXIT_CLUSTER,
    errors.AttachRefused: EXIT_ATTACH,
}

DEFAULT_RUNS_DIR = Path(".perfstack") / "runs"


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, its width found as argparse finds it ($COLUMNS, else the
    terminal's, less 2) without importing shutil, which argparse does for every parser and
    argument it checks: a reading command's start need not pay for it."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        if width is None:
            width = terminal_columns(80) - 2
        super().__init__(prog, indent_increment, max_help_position, width)


def terminal_columns(default: int) -> int:
    """The columns to lay text out in, as shutil.get_terminal_size finds them without
    importing shutil: $COLUMNS when a positive number, else standard output's terminal,
    else ``default``."""
    import os

    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(1).columns or default
    except (OSError, ValueError):
        return default


def percentage(text: str) -> float:
    """'5%' or '5' -> 0.05: a percentage, always, for every PCT option (argparse's ``type``).
    One '%' at most ('5%%' is refused, not read as 5%); a bare number under 1 ('0.5') is
    refused too: half a percent or a fraction meaning 50%, it cannot be told, and reading it
    either way made a threshold jump (1 was 1%, 0.99 was 99%)."""
    bare = text.strip()
    number = bare[:-1] if bare.endswith("%") else bare
    try:
        value = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r} (give e.g. 5%)") from None
    if not bare.endswith("%") and 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a percentage is meant; write {value:g}% "
                                         f"or {value * 100:g}%")
    if not 0 <= value < 1000:
        raise argparse.ArgumentTypeError(f"percentage out of range: {text!r} (0% to 1000%)")
    return value / 100


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2, not a usage dump."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise errors.UsageError(f"{message} (see '{self.prog} --help')")
