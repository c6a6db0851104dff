"""What a session is asked to do (``RunOptions``) and who is told how it goes (``Progress``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from perfstack.plugin.backend import StepWindow
from perfstack.records import datarecord, field
from perfstack.runfolder import ranks

if TYPE_CHECKING:
    from perfstack.report import Report


class Progress(Protocol):
    """Told what the driver is doing, for a progress display."""

    def begin(self, label: str) -> None:
        """A run (warm-up, baseline repeat, or backend) starts."""

    def tick(self, elapsed: float) -> None:
        """The current run has been going for ``elapsed`` seconds."""

    def end(self, label: str, status: str) -> None:
        """The current run ended with ``status``."""


@runtime_checkable
class EstimatingProgress(Progress, Protocol):
    """A progress display that says how long is left ("about 20 s left")."""

    def estimate(self, per_run_s: float | None, runs_after: int) -> None:
        """How long a run takes (the baseline's median; None: not known yet) and how many runs
        come after the one that begins."""


@runtime_checkable
class AnsweringProgress(Progress, Protocol):
    """A progress display that says the answer as soon as the finished runs give one, before
    the session ends (the report refines it)."""

    def answer_so_far(self, after: str, done: int, total: int,
                      report: Callable[[], Report]) -> bool:
        """Backend ``after`` (``done`` of ``total``) is in: say the answer ``report()`` (the
        report of the runs so far, built when called) gives, and return whether one was
        said (the driver then asks no more)."""


class NoProgress:
    """Told nothing: a session with no display."""

    def begin(self, label: str) -> None:
        pass

    def tick(self, elapsed: float) -> None:
        pass

    def end(self, label: str, status: str) -> None:
        pass


@datarecord
class RunOptions:
    """How to run the session."""

    repeat: int = 3
    warmup: int = 1
    timeout_s: float | None = None
    kill_grace_s: float = 5.0
    collect_timeout_s: float | None = 600.0  # a backend's collect() longer than this fails it
    #: Launch through torchrun with this many processes per node (None: a plain process).
    nproc_per_node: int | None = None
    ranks: str = "0"  # which ranks per-rank backends profile: "0", "all", "0,3"
    torchrun_args: list[str] = field(default_factory=list)  # passed through (rendezvous...)
    backend_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: --steps N --warmup-steps K: every run ends after K+N steps; backends measure N
    steps: StepWindow | None = None
    #: --keep-going: run every backend even after the workload failed without a profiler
    keep_going: bool = False
    #: the quick backends with runs of their own (the sampler) before the warm-up and the
    #: baseline, so that the sampler's answer comes after one run of the workload, not five
    #: (every single-process ``perfstack run``; not ab, sweep or torchrun jobs)
    answer_first: bool = False
    #: backends that ride along: --plugins did not name them (``Backend.rides``)
    riding: frozenset[str] = frozenset()


def selected_ranks(spec: str, present: list[int]) -> list[int]:
    """Return the ranks ``--ranks`` names ("0", "all", "0,3") among those present (the
    global ranks whose processes ran on this node)."""
    return ranks.among(spec, present)


def rank_selected(spec: str, rank: int) -> bool:
    """Return whether ``--ranks`` names ``rank``."""
    return ranks.selected(spec, rank)
