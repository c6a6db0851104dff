"""What a session ran: each child process and how it ended (``RunRecord``, ``ExitInfo``), each
backend's result and its overhead (``BackendResult``, ``Overhead``), and the session as a
whole (``RunInfo``), each with its JSON form. No I/O."""

from __future__ import annotations

from typing import Any

from perfstack.records import datarecord, field, field_names
from perfstack.report.measures import Quantity, Status


@datarecord
class ExitInfo:
    """How one child process ended."""

    status: str  # "exited" | "signalled" | "timeout" | "interrupted" | "not_started"
    code: int | None = None
    signal: int | None = None
    signal_name: str | None = None

    @property
    def clean(self) -> bool:
        """Return True when the process exited with status 0."""
        return self.status == "exited" and self.code == 0

    def describe(self) -> str:
        """Return a short human description: 'exit 0', 'SIGSEGV', 'timeout'."""
        if self.status == "exited":
            return f"exit {self.code}"
        if self.status == "signalled":
            return self.signal_name or f"signal {self.signal}"
        return self.status.replace("_", " ")

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "status": self.status,
            "code": self.code,
            "signal": self.signal,
            "signal_name": self.signal_name,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExitInfo:
        """Build an ExitInfo from its JSON form."""
        fields: dict[str, Any] = {k: data.get(k) for k in field_names(cls)}
        return cls(**fields)


@datarecord
class RunRecord:
    """One child process perfstack started: a warm-up, a baseline repeat or a backend run."""

    id: str
    role: str  # "warmup" | "baseline" | "backend" | "extra" (a backend's further runs)
    backend: str | None
    argv: list[str]
    started: str  # ISO 8601, UTC
    wall_s: float | None
    exit: ExitInfo
    rusage: dict[str, float] = field(default_factory=dict)
    stdout: str | None = None  # paths relative to the report's folder
    stderr: str | None = None
    python_stack: str | None = None  # faulthandler's dump after a crash or at a timeout
    stdout_tail: str | None = None  # the last lines the workload printed
    stderr_tail: str | None = None
    #: the machine-speed probe timed in the workload's process: {"start": {"python_s": ..,
    #: "native_s": ..}, "end": {...}} (perfstack.machine.probe); None when it did not run
    probe: dict[str, dict[str, float]] | None = None
    #: user-space instructions the workload's processes retired (perfstack.machine.counters); None
    #: when not asked for, a value of None with the reason when the machine cannot count them
    instructions: Quantity | None = None
    #: what else the machine did during the run (perfstack.machine.load): {"others_cpus": ..,
    #: "steal": .., "cpus": ..}; None where it was not measured
    machine_load: dict[str, Any] | None = None
    #: how many steps the workload marked in this run (perfstack.step() or an optimizer
    #: step), None where it marked none or the count was not saved
    steps: int | None = None
    #: set where the run did not end cleanly: its memory at the end, to tell an out-of-memory
    #: death ({"oom_killed": the OOM killer's count rose (None: not counted here),
    #: "peak_rss_bytes", "peak_epoch_s", "stack": [[file, line, function], ...] innermost
    #: first, the main thread where the last high was reached, "recent": [[epoch_s, bytes]],
    #: "steps", "step_rss_bytes", "limits": {"cgroup"|"address_space"|"machine": bytes},
    #: "tensors": {"device": "cpu"|"cuda"|"xpu", "kinds": {kind: bytes}, "modules": {module:
    #: bytes}} where a refused allocation, the host's or a device's, killed a torch workload})
    memory: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        out: dict[str, Any] = {
            "id": self.id,
            "role": self.role,
            "backend": self.backend,
            "argv": self.argv,
            "started": self.started,
            "wall_s": self.wall_s,
            "exit": self.exit.to_dict(),
            "rusage": self.rusage,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "python_stack": self.python_stack,
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
        }
        if self.probe is not None:
            out["probe"] = self.probe
        if self.instructions is not None:
            out["instructions"] = self.instructions.to_dict()
        if self.machine_load is not None:
            out["machine_load"] = self.machine_load
        if self.steps is not None:
            out["steps"] = self.steps
        if self.memory is not None:
            out["memory"] = self.memory
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        """Build a RunRecord from its JSON form."""
        fields: dict[str, Any] = {k: data.get(k) for k in field_names(cls)}
        fields["exit"] = ExitInfo.from_dict(data["exit"])
        fields["rusage"] = dict(data.get("rusage") or {})
        if data.get("instructions") is not None:
            fields["instructions"] = Quantity.from_dict(data["instructions"])
        return cls(**fields)


@datarecord
class Overhead:
    """A backend's run time against the baseline's: ratio, and the baseline's own spread."""

    ratio: float
    baseline_median_s: float
    baseline_stdev_s: float | None  # None with a single baseline sample
    baseline_n: int
    #: "wall": whole runs' wall times; "step": the measured steps' times (under --steps)
    basis: str = "wall"

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        out: dict[str, Any] = {
            "ratio": self.ratio,
            "baseline_median_s": self.baseline_median_s,
            "baseline_stdev_s": self.baseline_stdev_s,
            "baseline_n": self.baseline_n,
        }
        if self.basis != "wall":
            out["basis"] = self.basis
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Overhead:
        """Build an Overhead from its JSON form."""
        return cls(**{k: data[k] for k in field_names(cls) if k in data})


@datarecord
class BackendResult:
    """What one backend did in this session."""

    name: str
    status: Status
    layers: list[str]
    package: str | None = None  # "dist-name version" it comes from
    reason: str | None = None
    fix: str | None = None
    run: str | None = None  # RunRecord.id of its own run, when it had one
    wall_s: float | None = None
    overhead: Overhead | None = None
    overhead_note: str | None = None  # why there is no overhead figure
    artifacts: dict[str, str] = field(default_factory=dict)  # label -> relative path
    notes: list[str] = field(default_factory=list)
    traceback: str | None = None
    #: the value of its rows that diff compares and tables rank by, per row kind ("" for
    #: rows without one), as the backend declared it (``Backend.primary``)
    primary: dict[str, str] = field(default_factory=dict)
    #: seconds perfstack spent reading this backend's output into records (its collect)
    collect_s: float | None = None
    #: its options set to other than their defaults for this run (what it measured depends
    #: on them: history keeps such runs in series of their own)
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status.value,
            "layers": self.layers,
            "package": self.package,
            "reason": self.reason,
            "fix": self.fix,
            "run": self.run,
            "wall_s": self.wall_s,
            "overhead": self.overhead.to_dict() if self.overhead else None,
            "overhead_note": self.overhead_note,
            "artifacts": self.artifacts,
            "notes": self.notes,
            "traceback": self.traceback,
        }
        if self.primary:
            out["primary"] = self.primary
        if self.collect_s is not None:
            out["collect_s"] = self.collect_s
        if self.options:
            out["options"] = self.options
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BackendResult:
        """Build a BackendResult from its JSON form."""
        fields: dict[str, Any] = {k: data.get(k) for k in field_names(cls)}
        fields["status"] = Status(data["status"])
        fields["overhead"] = Overhead.from_dict(data["overhead"]) if data.get("overhead") else None
        fields["artifacts"] = dict(data.get("artifacts") or {})
        fields["notes"] = list(data.get("notes") or [])
        fields["primary"] = dict(data.get("primary") or {})
        fields["options"] = dict(data.get("options") or {})
        return cls(**fields)


@datarecord
class RunInfo:
    """The session as a whole: what was run, when, and every child process it started."""

    command: list[str]  # the workload's own command line, as the user would type it
    cwd: str
    started: str
    duration_s: float
    perfstack_version: str
    repeat: int
    warmup: int
    timeout_s: float | None
    complete: bool  # False when the session was interrupted
    runs: list[RunRecord] = field(default_factory=list)
    #: set by ``perfstack ab``: {"id": the A/B session, "side": "base" | "new"}. The two
    #: sides' baseline runs were interleaved, so their i-th samples form a pair.
    pairing: dict[str, str] | None = None
    #: set by ``perfstack analyze``: nothing was run; the report was read from these files
    #: ({"path": ..., "backend": the backend that read it})
    analyzed: list[dict[str, str]] | None = None
    #: set by ``--steps``: {"warmup": K, "measured": N}: every run ended after K+N steps
    steps: dict[str, int] | None = None
    #: set by ``perfstack attach``: nothing was started; a running process was measured
    #: ({"pid": N, "sampled_s": seconds measured, "ended": "running" | "exited" |
    #: "interrupted": how the measuring ended})
    attached: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        out: dict[str, Any] = {
            "command": self.command,
            "cwd": self.cwd,
            "started": self.started,
            "duration_s": self.duration_s,
            "perfstack_version": self.perfstack_version,
            "repeat": self.repeat,
            "warmup": self.warmup,
            "timeout_s": self.timeout_s,
            "complete": self.complete,
            "runs": [r.to_dict() for r in self.runs],
        }
        if self.pairing is not None:
            out["pairing"] = self.pairing
        if self.analyzed is not None:
            out["analyzed"] = self.analyzed
        if self.steps is not None:
            out["steps"] = self.steps
        if self.attached is not None:
            out["attached"] = self.attached
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        """Build a RunInfo from its JSON form."""
        fields: dict[str, Any] = {k: data.get(k) for k in field_names(cls)}
        fields["runs"] = [RunRecord.from_dict(r) for r in data.get("runs", [])]
        return cls(**fields)
