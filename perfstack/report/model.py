"""The report model: typed records, no I/O.

A report is plain data. Everything here converts to and from the JSON shape described by
``schemas/report.schema.json``; reading, writing and validating files lives in ``files``.
One concept over 400 lines: the schema's records side by side, each with its JSON form, so that
the model reads in one place against the schema it mirrors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

SCHEMA_NAME = "perfstack/report"
SCHEMA_VERSION = 3


class Layer(str, Enum):
    """Where in the stack a number was measured, from the Python line down to the hardware;
    ``module`` is the model's ``nn.Module`` tree, between the Python line and the op;
    ``memory`` holds where the memory goes (by function, by torch's categories) beside them."""

    PYTHON = "python"
    MODULE = "module"
    FRAMEWORK = "framework"
    KERNEL = "kernel"
    HARDWARE = "hardware"
    MEMORY = "memory"


#: Metrics may also describe the whole run (wall time, throughput), which is no single layer.
METRIC_LAYERS = (*(layer.value for layer in Layer), "run")


class Status(str, Enum):
    """What happened to one backend."""

    OK = "ok"
    PARTIAL = "partial"  # ran, but some of what it measures could not be measured here
    EMPTY = "empty"  # ran, and the run gave it nothing to report (no oneDNN primitive ran)
    UNAVAILABLE = "unavailable"  # cannot run on this machine; reason and fix say why
    FAILED = "failed"  # the backend's own code raised or produced malformed records
    CRASHED = "crashed"  # the workload died (signal or non-zero exit) under this backend
    TIMEOUT = "timeout"  # the workload was stopped at --timeout
    INTERRUPTED = "interrupted"  # the user pressed Ctrl-C during this backend's run
    SKIPPED = "skipped"  # never started, because the session was interrupted first


class Better(str, Enum):
    """Which direction of change is an improvement for a metric."""

    HIGHER = "higher"
    LOWER = "lower"
    NEITHER = "neither"  # informational: diff reports the change but never gates on it


@dataclass
class Quantity:
    """One measured value with its unit; ``value`` is None when it could not be measured."""

    value: float | int | None
    unit: str
    reason: str | None = None  # why the value is missing (never a silent zero)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        out: dict[str, Any] = {"value": self.value, "unit": self.unit}
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Quantity:
        """Build a Quantity from its JSON form."""
        return cls(data["value"], data["unit"], data.get("reason"))

    @classmethod
    def unsupported(cls, unit: str, reason: str) -> Quantity:
        """Return a value the machine could not measure, with the reason."""
        return cls(value=None, unit=unit, reason=reason)


@dataclass
class Row:
    """One row of a layer: a stable key, what was measured, and who measured it.

    ``key`` is stable across runs (function + file + line; op name + input shapes; kernel
    name; counter name) so that ``diff`` can match rows. ``links`` holds keys into other
    layers (this op was called from that Python function), never copies of their rows.
    """

    key: str
    name: str
    source: str
    values: dict[str, Quantity]
    attrs: dict[str, Any] = field(default_factory=dict)
    links: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        out: dict[str, Any] = {
            "key": self.key,
            "name": self.name,
            "source": self.source,
            "values": {name: q.to_dict() for name, q in self.values.items()},
        }
        if self.attrs:
            out["attrs"] = self.attrs
        if self.links:
            out["links"] = self.links
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Row:
        """Build a Row from its JSON form."""
        # Positional, and Quantity built inline: a big report has tens of thousands of rows.
        attrs = data.get("attrs")
        links = data.get("links")
        return cls(
            data["key"], data["name"], data["source"],
            {k: Quantity(v["value"], v["unit"], v.get("reason"))
             for k, v in data["values"].items()},
            dict(attrs) if attrs else {},
            {k: list(v) for k, v in links.items()} if links else {},
        )


@dataclass
class Metric:
    """A headline scalar that ``diff`` compares by name across reports."""

    name: str
    value: float | int | None
    unit: str
    layer: str  # a Layer's value, or "run"; a Layer is accepted
    source: str
    better: Better
    samples: list[float] | None = None  # repeated measurements, for significance tests
    reason: str | None = None  # why value is None
    #: what one sample is: "runs" (independent runs of the workload, the default) or "steps" /
    #: "intervals" / "collectives" (each collective kernel of a process group, in order) of one
    #: run. Samples from one run share that run's conditions, so ``diff`` judges them against
    #: the run-to-run noise, not against their own spread.
    samples_of: str = "runs"
    #: a detail: left out of the report's default view (``show --full`` lists it), still
    #: compared by diff
    detail: bool = False
    #: what exactly the figure counts, in one line: its one definition, shown with it
    description: str | None = None
    #: figures of different backends that measure related things share a group (e.g.
    #: "interpreter"); the report shows them together, each with its description
    group: str | None = None

    def __post_init__(self) -> None:
        # A layer may be given as the Layer enum, as rows' layers are, or as its name.
        if isinstance(self.layer, Layer):
            self.layer = self.layer.value

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        out: dict[str, Any] = {
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "layer": self.layer,
            "source": self.source,
            "better": self.better.value,
        }
        if self.samples is not None:
            out["samples"] = self.samples
        if self.reason is not None:
            out["reason"] = self.reason
        if self.samples_of != "runs":
            out["samples_of"] = self.samples_of
        if self.detail:
            out["detail"] = True
        if self.description is not None:
            out["description"] = self.description
        if self.group is not None:
            out["group"] = self.group
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Metric:
        """Build a Metric from its JSON form."""
        return cls(
            name=data["name"],
            value=data["value"],
            unit=data["unit"],
            layer=data["layer"],
            source=data["source"],
            better=Better(data["better"]),
            samples=data.get("samples"),
            reason=data.get("reason"),
            samples_of=data.get("samples_of", "runs"),
            detail=bool(data.get("detail", False)),
            description=data.get("description"),
            group=data.get("group"),
        )


SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
#: Findings about how well the run could be measured (noise, a profiler's overhead) come after
#: the findings about the workload itself, at the same severity.
MEASUREMENT_RULES = ("run.noisy-baseline", "run.single-baseline", "run.high-overhead")
#: Said before every other finding of their severity: a failed run, then a machine busy with
#: other programs (every figure after it is partly theirs).
FIRST_RULES = ("run.crashed", "run.exited", "run.timeout", "run.busy-machine")


def order_findings(findings: list[Finding]) -> list[Finding]:
    """Return findings in the order a report shows them: the most severe first, and at one
    severity a failed run, then a busy machine, then the workload's own, then the ones about
    measuring it (stable otherwise)."""
    def rank(f: Finding) -> int:
        if f.rule in FIRST_RULES:
            return FIRST_RULES.index(f.rule) - len(FIRST_RULES)
        return int(f.rule in MEASUREMENT_RULES)

    return sorted(findings, key=lambda f: (SEVERITY_ORDER.get(f.severity, 3), rank(f)))


@dataclass
class Finding:
    """Something a reader should look at first, with the evidence and what to do about it."""

    rule: str
    title: str
    layer: str
    severity: str  # "info" | "warning" | "critical"
    evidence: list[str]
    action: str
    source: str

    def __post_init__(self) -> None:
        if isinstance(self.layer, Layer):  # the enum, as rows use it, or its name
            self.layer = self.layer.value

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "rule": self.rule,
            "title": self.title,
            "layer": self.layer,
            "severity": self.severity,
            "evidence": self.evidence,
            "action": self.action,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        """Build a Finding from its JSON form."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


SEVERITIES = ("info", "warning", "critical")


@dataclass
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
        fields: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__}
        return cls(**fields)


@dataclass
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
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        """Build a RunRecord from its JSON form."""
        fields: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__}
        fields["exit"] = ExitInfo.from_dict(data["exit"])
        fields["rusage"] = dict(data.get("rusage") or {})
        if data.get("instructions") is not None:
            fields["instructions"] = Quantity.from_dict(data["instructions"])
        return cls(**fields)


@dataclass
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
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
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
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BackendResult:
        """Build a BackendResult from its JSON form."""
        fields: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__}
        fields["status"] = Status(data["status"])
        fields["overhead"] = Overhead.from_dict(data["overhead"]) if data.get("overhead") else None
        fields["artifacts"] = dict(data.get("artifacts") or {})
        fields["notes"] = list(data.get("notes") or [])
        fields["primary"] = dict(data.get("primary") or {})
        return cls(**fields)


@dataclass
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
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        """Build a RunInfo from its JSON form."""
        fields: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__}
        fields["runs"] = [RunRecord.from_dict(r) for r in data.get("runs", [])]
        return cls(**fields)


@dataclass
class Report:
    """A whole perfstack report: run, environment, backends, layers, metrics and findings."""

    run: RunInfo
    environment: dict[str, Any]
    backends: list[BackendResult] = field(default_factory=list)
    layers: dict[Layer, list[Row]] = field(default_factory=lambda: {lay: [] for lay in Layer})
    metrics: list[Metric] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def backend(self, name: str) -> BackendResult | None:
        """Return the named backend's result, or None."""
        return next((b for b in self.backends if b.name == name), None)

    def metric(self, name: str) -> Metric | None:
        """Return the first metric with this name, or None."""
        return next((m for m in self.metrics if m.name == name), None)

    def run_record(self, run_id: str) -> RunRecord | None:
        """Return the run with this id, or None."""
        return next((r for r in self.run.runs if r.id == run_id), None)

    def records(self, layer: Layer | str) -> list[dict[str, Any]]:
        """Return one layer's rows as flat records, for a notebook: ``key``, ``name``,
        ``source``, each value by its name (None when unknown) with ``<name>_unit`` beside
        it, and the attrs (prefixed ``attr_``)."""
        out = []
        for row in self.layers[Layer(layer)]:
            record: dict[str, Any] = {"key": row.key, "name": row.name, "source": row.source}
            for name, q in row.values.items():
                record[name] = q.value
                record[f"{name}_unit"] = q.unit
            for name, value in row.attrs.items():
                record[f"attr_{name}"] = value
            out.append(record)
        return out

    def dataframe(self, layer: Layer | str) -> Any:
        """Return one layer's rows as a pandas DataFrame (``records``), when pandas is
        installed; perfstack does not depend on it."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Report.dataframe needs pandas (pip install pandas); "
                              "Report.records gives the same rows as plain dicts") from None
        return pandas.DataFrame(self.records(layer))

    def metric_records(self) -> list[dict[str, Any]]:
        """Return the metrics as plain dicts (their JSON form)."""
        return [m.to_dict() for m in self.metrics]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form, with the schema name and version first."""
        return {
            "schema": SCHEMA_NAME,
            "version": SCHEMA_VERSION,
            "run": self.run.to_dict(),
            "environment": self.environment,
            "backends": [b.to_dict() for b in self.backends],
            "layers": {lay.value: [r.to_dict() for r in self.layers[lay]] for lay in Layer},
            "metrics": [m.to_dict() for m in self.metrics],
            "findings": [f.to_dict() for f in self.findings],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """Build a Report from its JSON form (already checked against the schema)."""
        return cls(
            run=RunInfo.from_dict(data["run"]),
            environment=data["environment"],
            backends=[BackendResult.from_dict(b) for b in data["backends"]],
            layers={
                lay: [Row.from_dict(r) for r in data["layers"].get(lay.value, [])] for lay in Layer
            },
            metrics=[Metric.from_dict(m) for m in data["metrics"]],
            findings=[Finding.from_dict(f) for f in data["findings"]],
        )
