"""A one-line progress display on stderr while runs go on; silent when stderr is no TTY."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from perfstack.units import fmt_seconds


class TerminalProgress:
    """Shows which run is going and for how long, then one line per finished run."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status: Status | None = None
        self.label = ""
        self.elapsed = 0.0

    def begin(self, label: str) -> None:
        """Start showing ``label``."""
        self.label, self.elapsed = label, 0.0
        self.status = self.console.status(escape(f"{label} …"))
        self.status.start()

    def tick(self, elapsed: float) -> None:
        """Update the elapsed time."""
        self.elapsed = elapsed
        if self.status is not None:
            self.status.update(escape(f"{self.label} · {elapsed:.1f} s"))

    def end(self, label: str, status: str) -> None:
        """Replace the live line with the finished run's result."""
        if self.status is not None:
            self.status.stop()
            self.status = None
        mark = "[green]✓[/]" if status == "exit 0" else "[red]✗[/]"
        took = fmt_seconds(self.elapsed)
        self.console.print(f"{mark} {escape(label)}: {escape(status)} ({took})",
                           highlight=False, markup=True)


class QuietProgress:
    """No output at all (stderr is not a terminal)."""

    def begin(self, label: str) -> None:
        """Do nothing."""

    def tick(self, elapsed: float) -> None:
        """Do nothing."""

    def end(self, label: str, status: str) -> None:
        """Do nothing."""
