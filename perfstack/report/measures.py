"""The report's measurements: where in the stack a number was measured (``Layer``), how a
backend did (``Status``), which way is better (``Better``), a value with its unit
(``Quantity``), a row of a layer's table (``Row``) and a named figure (``Metric``), each with
its JSON form as ``schemas/report.schema.json`` describes it. No I/O."""

from __future__ import annotations

from enum import Enum
from typing import Any

from perfstack.records import datarecord, field


class Layer(str, Enum):
    """Where in the stack a number was measured, from the Python line down to the hardware;
    ``compile`` is what torch.compile made of the Python (compiled frames, graph breaks,
    recompiles, compile time); ``module`` is the model's ``nn.Module`` tree, between the
    Python line and the op;
    ``memory`` holds where the memory goes (by function, by torch's categories) beside them."""

    PYTHON = "python"
    COMPILE = "compile"
    MODULE = "module"
    FRAMEWORK = "framework"
    KERNEL = "kernel"
    HARDWARE = "hardware"
    MEMORY = "memory"


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


@datarecord
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


@datarecord
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


@datarecord
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
    #: under ``samples_of`` "steps": each sample's step by its number in the workload (the N of
    #: torch's ``ProfilerStep#N``), where the backend knows it; else the samples are counted
    #: from 1
    sample_steps: list[int] | None = None
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
        if self.sample_steps is not None:
            out["sample_steps"] = self.sample_steps
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
            sample_steps=data.get("sample_steps"),
            detail=bool(data.get("detail", False)),
            description=data.get("description"),
            group=data.get("group"),
        )
