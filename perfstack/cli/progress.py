"""Progress on stderr while runs go on: which run of how many, for how long, and about how
long the session has left (estimated from the baseline's wall time).

On a terminal, one live line replaced by a line per finished run; elsewhere (CI logs, a pipe)
one plain line per finished run, so a log shows progress as it happens, not only at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from perfstack.report.units import fmt_seconds

if TYPE_CHECKING:
    from rich.console import Console
    from rich.status import Status

    from perfstack.report import Report


def early_answer(report: Callable[[], Report]) -> list[str]:
    """The answer the runs so far give, in the report's words: what bounds the time and the
    workload's hottest function (nothing when no backend measured either), or that the
    workload failed (hung, crashed) however few samples its run gave."""
    from perfstack.analysis.view import build
    from perfstack.render.words.common import FAILED_RUN_RULES, answer_lines

    view = build(report(), top=3)
    finding = view.headline.finding
    failed = finding is not None and finding.rule in FAILED_RUN_RULES  # (hung, crashed...)
    if not failed and view.headline.bound is None and view.headline.hottest is None:
        return []
    return [ln for ln in answer_lines(view)
            if not ln.startswith(("Top finding", "No time budget", "The figures below"))][:3]


def _escape(text: str) -> str:
    """``text`` with rich's markup escaped (rich is imported only where a terminal shows the
    live line: 18 ms of every command's start otherwise)."""
    from rich.markup import escape

    return escape(text)


def stderr_is_terminal() -> bool:
    """Whether the progress lines go to a terminal, as rich decides it, without importing
    rich where standard error is no terminal and no variable says otherwise (a log, a pipe,
    a test): rich's answer is then always no."""
    if not sys.stderr.isatty() and not any(
            os.environ.get(v) is not None for v in ("TTY_COMPATIBLE", "FORCE_COLOR")):
        return False
    from rich.console import Console

    return bool(Console(stderr=True).is_terminal)


def left(seconds: float | None) -> str:
    """'about 20 s left', or '' when there is no estimate yet."""
    if seconds is None:
        return ""
    return f"about {fmt_seconds(max(seconds, 0.0))} left"


class TerminalProgress:
    """Shows which run is going and for how long, then one line per finished run."""

    def __init__(self, console: Console, side: str = "") -> None:
        self.console = console
        self.side = f"{side}, " if side else ""  # which of two sessions (ab: base, new)
        self.status: Status | None = None
        self.label = ""
        self.elapsed = 0.0
        self.remaining: float | None = None
        self.per_run: float | None = None

    def begin(self, label: str) -> None:
        """Start showing ``label``."""
        self.label, self.elapsed = self.side + label, 0.0
        self.status = self.console.status(_escape(f"{label} …"))
        self.status.start()

    def estimate(self, per_run_s: float | None, runs_after: int) -> None:
        """How long a run takes (the baseline's median wall time; None: not known yet) and
        how many runs come after the current one."""
        self.remaining = None if per_run_s is None else per_run_s * runs_after
        self.per_run = per_run_s

    def tick(self, elapsed: float) -> None:
        """Update the elapsed time."""
        self.elapsed = elapsed
        if self.status is not None:
            eta = left(self.remaining + max((self.per_run or 0.0) - elapsed, 0.0)
                       if self.remaining is not None else None)
            self.status.update(_escape(f"{self.label} · {elapsed:.1f} s"
                                      + (f" · {eta}" if eta else "")))

    def end(self, label: str, status: str) -> None:
        """Replace the live line with the finished run's result."""
        if self.status is not None:
            self.status.stop()
            self.status = None
        mark = "[green]✓[/]" if status == "exit 0" else "[red]✗[/]"
        took = fmt_seconds(self.elapsed)
        self.console.print(f"{mark} {_escape(self.side + label)}: {_escape(status)} ({took})",
                           highlight=False, markup=True)

    def answer_so_far(self, after: str, done: int, total: int,
                      report: Callable[[], Report]) -> bool:
        """Say the answer of the runs so far, once a backend gives one (not in ``ab``,
        whose answer is the comparison)."""
        lines = [] if self.side else early_answer(report)
        if lines:
            self.console.print(f"[bold]so far[/] ({_escape(after)} in, {done} of {total} "
                               "backends; the report refines it):", highlight=False,
                               markup=True)
            for line in lines:
                self.console.print("  " + _escape(line), highlight=False, markup=True)
        return bool(lines)


class PlainProgress:
    """One plain line per finished run, for logs: 'perfstack: run 3 of 9, baseline-2: exit 0
    (2.1 s); about 20 s left'."""

    def __init__(self, stream: TextIO | None = None, side: str = "") -> None:
        self.stream = stream
        self.side = f"{side}, " if side else ""  # which of two sessions (ab: base, new)
        self.elapsed = 0.0
        self.began = time.monotonic()
        self.remaining: float | None = None

    def begin(self, label: str) -> None:
        """A run starts: nothing is printed until it ends."""
        self.elapsed, self.began = 0.0, time.monotonic()

    def estimate(self, per_run_s: float | None, runs_after: int) -> None:
        """How long a run takes (None: not known yet) and how many come after this one."""
        self.remaining = None if per_run_s is None or not runs_after else per_run_s * runs_after

    def tick(self, elapsed: float) -> None:
        """Note the elapsed time."""
        self.elapsed = elapsed

    def end(self, label: str, status: str) -> None:
        """Print the finished run."""
        self.elapsed = time.monotonic() - self.began
        eta = left(self.remaining)
        stream = self.stream or sys.stderr
        print(f"perfstack: {self.side}{label}: {status} ({fmt_seconds(self.elapsed)})"
              + (f"; {eta}" if eta else ""), file=stream, flush=True)

    def answer_so_far(self, after: str, done: int, total: int,
                      report: Callable[[], Report]) -> bool:
        """Say the answer of the runs so far, once a backend gives one (not in ``ab``)."""
        lines = [] if self.side else early_answer(report)
        if lines:
            stream = self.stream or sys.stderr
            width = max(60, shutil.get_terminal_size((100, 24)).columns)
            out = [f"perfstack: so far ({after} in, {done} of {total} backends; the report "
                   "refines it):"]
            for line in lines:  # one sentence a line, wrapped: a log is read at a terminal too
                out += textwrap.wrap(line, width, initial_indent="perfstack:   ",
                                     subsequent_indent="perfstack:     ")
            print("\n".join(out), file=stream, flush=True)
        return bool(lines)

