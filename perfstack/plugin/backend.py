"""What a backend is: the descriptor a plugin returns from ``perfstack_backends``.

A backend describes itself with data (name, layers, options) and answers four questions,
each a method with a safe default:

- ``check()``: can it run on this machine? If not, one-line reason and the fix.
- ``launch(ctx)``: how it changes the workload's command (a wrapper such as ``perf stat``),
  its environment, or which functions to start inside the workload process.
- ``attach(ctx, pid)``: what it attaches to the running workload (a sampler, a tracer).
- ``collect(ctx, outcome)``: how its raw output becomes normalized rows and metrics.

Every backend gets its own run of the workload (no profiler disturbs another's numbers),
unless it sets ``own_run = False`` and reads the baseline runs (costless measurements).
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from perfstack.records import datarecord, field
from perfstack.report import Finding, Layer, Metric, Row, RunRecord


@datarecord(frozen=True)
class Availability:
    """Whether a backend can run here; when not, why and how to fix it."""

    ok: bool
    reason: str | None = None
    fix: str | None = None
    error: str | None = None  # the traceback when the backend's own check raised

    @classmethod
    def yes(cls) -> Availability:
        """Return 'available'."""
        return cls(True)

    @classmethod
    def no(cls, reason: str, fix: str | None = None) -> Availability:
        """Return 'unavailable', with a one-line reason and, when there is one, the fix."""
        return cls(False, reason, fix)


@datarecord(frozen=True)
class Option:
    """A backend option; it becomes the ``--<backend>-<name>`` flag of ``perfstack run``.

    Its value is checked when the command line is parsed, before anything runs: ``type``
    converts it, ``minimum``/``maximum`` bound a number, ``choices`` list the allowed values,
    and ``check`` (a function of the converted value returning why it is wrong, or None)
    does the rest. A bad value is one line and exit 2."""

    name: str
    help: str
    default: Any = None
    type: type = str
    choices: Sequence[Any] | None = None
    flag: bool = False  # a switch (store_true) rather than a value
    minimum: float | None = None
    maximum: float | None = None
    check: Callable[[Any], str | None] | None = None

    def parse(self, text: str) -> Any:
        """Convert and check a value given on the command line; raise ValueError with the
        reason when it is not acceptable."""
        try:
            value = self.type(text)
        except (TypeError, ValueError):
            kind = {int: "a whole number", float: "a number"}.get(self.type, "valid")
            raise ValueError(f"{text!r} is not {kind}") from None
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"must be at least {self.minimum:g}, got {text}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"must be at most {self.maximum:g}, got {text}")
        if self.check is not None:
            problem = self.check(value)
            if problem:
                raise ValueError(problem)
        return value


@datarecord(frozen=True)
class InProcessHook:
    """A function the bootstrap calls inside the workload process before the script starts.

    ``target`` is ``"module:function"``. The function is called as ``function(options,
    artifact_dir)`` and may return a callable, which the bootstrap calls when the script
    ends (normally, by exception, or on SIGTERM at a timeout), to flush its output.
    """

    target: str
    options: dict[str, Any] = field(default_factory=dict)


@datarecord
class Launch:
    """How a backend changes its own run of the workload."""

    wrap: list[str] = field(default_factory=list)  # argv prefix, e.g. ["perf", "stat", "--"]
    env: dict[str, str] = field(default_factory=dict)  # added to the workload's environment
    inprocess: list[InProcessHook] = field(default_factory=list)


@datarecord
class Workload:
    """The program to profile: a script path or a module name, and its arguments."""

    target: str
    args: list[str] = field(default_factory=list)
    module: bool = False  # True for ``-m module``

    def home(self) -> str:
        """The workload's own folder: its script's, or the current folder for ``-m``."""
        if self.module:
            return os.getcwd()
        return os.path.dirname(os.path.abspath(self.target))

    def command(self) -> list[str]:
        """Return the command line as the user would type it without perfstack."""
        return ["python", "-m", self.target, *self.args] if self.module else [
            "python", self.target, *self.args
        ]


class ExtraRunner(Protocol):
    """Runs the workload once more for a backend that needs several runs (a sweep)."""

    def __call__(self, label: str, *, env: dict[str, str] | None = None,
                 python: str | None = None, args: Sequence[str] | None = None,
                 inprocess: Sequence[InProcessHook] = ()) -> Outcome:
        """Run the workload plainly (no profiler) and return how it went.

        ``label`` names the run (unique within the backend; it becomes a folder under the
        backend's own), ``env`` is added to the workload's environment, and ``python`` is
        another interpreter to run it with (perfstack's bootstrap is made importable there;
        the workload's own imports must be installed for that interpreter). ``args`` replace
        the workload's arguments for this run; ``inprocess`` hooks are loaded in it (light
        ones: it is meant to be unprofiled). The run is recorded in the report with role
        ``extra``.
        """
        ...


@datarecord(frozen=True)
class StepWindow:
    """``perfstack run --steps N --warmup-steps K``: every run of the workload ends cleanly
    after K+N steps, and the backends measure the last N (the window opens at step K)."""

    warmup: int
    measured: int

    @property
    def total(self) -> int:
        """Steps each run makes before it is ended."""
        return self.warmup + self.measured


@datarecord
class RunContext:
    """What a backend is told about the run it takes part in."""

    backend: str
    workload: Workload
    artifact_dir: Path  # this backend's own folder; created before launch()
    options: dict[str, Any]  # this backend's options, by Option.name
    timeout_s: float | None
    baseline: list[Outcome] = field(default_factory=list)  # the baseline repeats, warm-ups excluded
    #: Runs the workload again, for backends that compare several runs; set by the driver.
    run_extra: ExtraRunner | None = None
    #: Set under ``--steps``: each run ends after ``steps.total`` steps. In-process backends
    #: measure the last ``steps.measured`` (the torch backend's schedule follows it); attach()
    #: is called when the window opens (after the warm-up steps), not at the start.
    steps: StepWindow | None = None
    #: Which of the backend's runs this is (0: the first; see ``Backend.run_count``).
    run_index: int = 0
    #: The warm-up runs before the baseline (``--warmup``): unmeasured, but what a first run
    #: pays (a cold compile cache) is in them.
    warmups: list[Outcome] = field(default_factory=list)
    #: Set by ``perfstack attach``: a process perfstack did not start (``Backend.live``).
    live: bool = False


@datarecord
class Outcome:
    """How one run of the workload went, as the driver saw it."""

    record: RunRecord
    artifact_dir: Path
    workload_pid: int | None  # the Python process's pid (under a wrapper, not the child's)
    start_ns: int | None  # time.time_ns() when the workload script started, if it did
    steps: int | None = None  # how many times the workload called perfstack.step(), if known
    #: a backend with several runs (``Backend.run_count``): the outcomes of the runs after
    #: the first, in order
    more: list[Outcome] = field(default_factory=list)


@datarecord
class Collected:
    """A backend's normalized results."""

    rows: dict[Layer, list[Row]] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    artifacts: dict[str, Path] = field(default_factory=dict)  # label -> file it wrote
    notes: list[str] = field(default_factory=list)  # caveats a reader should see
    #: set when some of what the backend measures could not be measured here (the backend's
    #: status becomes ``partial``): one line saying what is missing and why
    partial: str | None = None
    #: set when the run gave the backend nothing to report (status ``empty``, shown as
    #: "nothing to report"): one line saying why, e.g. no oneDNN primitive ran
    empty: str | None = None


@datarecord
class Recorded:
    """What a backend read from files recorded elsewhere (``perfstack analyze``): one
    process's (rank's) records."""

    collected: Collected
    files: list[Path]  # the files these records come from
    rank: int | None = None  # the rank that wrote them, when the files say
    world: int | None = None  # the job's number of ranks, when the files say
    #: facts about where they were recorded, for the report's environment (device names...)
    environment: dict[str, Any] = field(default_factory=dict)


class Attachment(Protocol):
    """Something a backend attached to the running workload (``Backend.attach``)."""

    def stop(self) -> None:
        """Stop (or wait for) the attached tool once the workload has exited."""


@runtime_checkable
class ReadyAttachment(Attachment, Protocol):
    """An attachment that can say when its tool really measures (a sampler that needs a
    moment to attach): under ``--steps`` the workload waits at the start of its measured steps
    until ``wait_ready`` returns."""

    def wait_ready(self, timeout_s: float) -> None:
        """Return once the tool measures, or after ``timeout_s`` seconds."""


class Backend:
    """Base class for a profiler backend. Subclass it, set the class attributes, override
    the methods that apply, and return an instance from ``perfstack_backends``."""

    name: ClassVar[str]
    layers: ClassVar[tuple[Layer, ...]]
    description: ClassVar[str] = ""
    own_run: ClassVar[bool] = True
    #: The top-level module the workload must import for this backend to see anything
    #: (``"torch"`` for torch.profiler): when the baseline runs show it never did, the backend
    #: is not run, and says why. None: it sees any workload.
    needs_import: ClassVar[str | None] = None
    opt_in: ClassVar[bool] = False  # heavy, or changes what it measures: only when named
    #: With no run of its own: joins any ``--plugins`` not naming it (refused with ``-NAME``).
    rides: ClassVar[bool] = False
    #: used by ``run --quick``: cheap, and answers where the time goes by itself (a sampler)
    quick: ClassVar[bool] = False
    #: Can measure a process perfstack did not start (``perfstack attach``): attach() gets
    #: ``ctx.live``, must not stop the process, and its stop() ends measuring at once.
    live: ClassVar[bool] = False
    #: ``"module:function"`` recording on demand in a ``run --on-demand`` job (inprocess.ondemand)
    capture: ClassVar[str | None] = None
    options: ClassVar[tuple[Option, ...]] = ()
    #: Under torchrun: True when its output is per workload process (in-process hooks, a pid
    #: attached to): attached and collected once per selected rank, in its folder; False for
    #: a tool that sees the whole job (``perf stat`` wrapping it, a GPU-wide sampler). None:
    #: from its ``launch`` (a ``wrap`` wraps the whole job: False; else True).
    per_rank: ClassVar[bool | None] = None

    def is_per_rank(self, launch: Launch | None) -> bool:
        """Return whether this backend is attached and collected per rank under torchrun
        (``per_rank``, or else decided by ``launch``)."""
        if self.per_rank is not None:
            return bool(self.per_rank)
        return not (launch is not None and launch.wrap)
    #: The value of this backend's rows that ``diff`` compares and every table ranks by: one
    #: value name for all rows, or one per row kind (``attrs["kind"]``; ``""`` for rows
    #: without one). Undeclared: the first time value (in seconds) of ``self_time``,
    #: ``self``, ``time``, ... the row has (``perfstack.analysis.primary``).
    primary: ClassVar[str | dict[str, str] | None] = None
    #: The metrics this backend publishes, by name prefix (``"budget."``, ``"gpu_busy"``): a
    #: report that lacks them can say which installed backend would give them.
    publishes: ClassVar[tuple[str, ...]] = ()
    #: How a person opens the raw outputs this backend keeps, shown beside each file so named:
    #: (file name ending, what opens it), ``(".speedscope.json", "speedscope.app")``.
    openers: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: The distributions it relies on (``("py-spy",)``): the environment records their versions.
    packages: ClassVar[tuple[str, ...]] = ()
    #: What to tell a reader when something this backend would give is missing, by the gap's
    #: name, which the core names: ``"op-callers"``, framework ops not linked to the Python
    #: functions that called them (``{"op-callers": "run X with --X-Y to record them"}``).
    advice: ClassVar[dict[str, str]] = {}

    def run_count(self, options: dict[str, Any]) -> int:
        """Return how many runs of the workload this backend needs with these options
        (default 1). Two tools that would compete for the CPUs in one run go in two runs:
        ``launch`` and ``attach`` are called for each, with ``ctx.run_index`` 0, 1, ...;
        ``collect`` once after the last, with the first run's outcome and the others in
        ``outcome.more``. Every run writes into the same ``ctx.artifact_dir`` (per rank under
        torchrun); the report's overhead is the first run's."""
        return 1

    def check(self) -> Availability:
        """Return whether this backend can run on this machine. Must be quick and safe."""
        return Availability.yes()

    def primary_by_kind(self) -> dict[str, str]:
        """Return ``primary`` as a mapping from row kind to value name."""
        declared = self.primary
        if isinstance(declared, str):
            return {"": declared}
        return {str(k): str(v) for k, v in (declared or {}).items()}

    def launch(self, ctx: RunContext) -> Launch:
        """Return how to change the workload's command, environment or process for this run."""
        return Launch()

    def rider(self) -> InProcessHook | None:
        """Return an in-process hook loaded in every run of the workload (the baseline's, the
        warm-ups' and each backend's), or None (the default).

        For what a library the workload uses records of itself anyway, read at the end at no
        cost to the measured time (torch.compile's record of its compiles): the hook writes
        it into each run's folder, and a backend with ``own_run = False`` reads it from the
        baseline runs (``ctx.baseline``). A rider must not slow the workload down: it is in
        the runs every overhead is measured against."""
        return None

    def attach(self, ctx: RunContext, pid: int) -> Attachment | None:
        """Attach to the running workload (its Python pid) and return a handle, or None."""
        return None

    def recognizes(self, path: Path) -> bool:
        """Return whether ``path`` is a file this backend records and can read back without
        running anything (``perfstack analyze``). Called for every file named or found in a
        named folder: decide from the name and at most the first few KB of the file."""
        return False

    def analyze(self, files: Sequence[Path]) -> list[Recorded]:
        """Read files this backend recognized (recorded elsewhere: another machine, a
        cluster job) into records, one ``Recorded`` per rank (or per process). Raise
        ``ValueError`` with one line when a file cannot be read."""
        return []

    def load_reader(self) -> None:
        """Import what ``analyze`` needs, without reading anything. ``perfstack analyze``
        calls it once, in its own process, before it forks local workers to read a job's
        units, so that each worker begins with the reader loaded instead of importing it
        again (a reader's imports can cost more than reading a small rank). The default
        imports nothing: each worker then loads the reader as it reads its first unit."""

    def analysis_units(self, files: Sequence[Path]) -> list[list[Path]]:
        """Split the files this backend recognized into units that are read independently,
        each by one ``analyze`` call that may run in another process or on another machine
        (``perfstack analyze`` reads a job's ranks side by side): one unit per rank or
        process, from the files' names and headers only. The default is one unit of every
        file. Raise ``ValueError`` with one line when the files contradict each other (two
        processes claiming one rank)."""
        return [list(files)]

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Return the normalized records from this backend's raw output.

        ``outcome`` is this backend's own run, or None for ``own_run = False`` backends,
        which read ``ctx.baseline``. Called even when the workload crashed or timed out:
        collect what was written, and say in ``notes`` what is partial.
        """
        return Collected()


_CHECKED: weakref.WeakKeyDictionary[Backend, Availability] = weakref.WeakKeyDictionary()


def availability(backend: Backend) -> Availability:
    """Return ``backend.check()``, asked once per backend object in a process (the plan, the
    run and the listing of one command agree). A check that raises is "not available", with
    the exception as its reason and the traceback in ``error``: the backend's own code failed,
    the command goes on."""
    try:
        known = _CHECKED.get(backend)
    except TypeError:  # an unhashable backend (a dataclass with eq): asked every time
        known = None
    if known is None:
        from perfstack.plugin.calls import call

        checked = call(backend.check, "check")
        known = checked.value if checked.ok and checked.value is not None else Availability(
            False, f"its availability check raised {type(checked.exception).__name__}: "
            f"{checked.exception}", None, checked.error)
        with contextlib.suppress(TypeError):
            _CHECKED[backend] = known
    return known
