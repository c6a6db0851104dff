"""The report model: typed records, no I/O.

A report is plain data. Everything here converts to and from the JSON shape described by
``schemas/report.schema.json``; reading, writing and validating files lives in ``files``.
The records live by what they describe: measurements (``measures``), findings
(``findings``), what the session ran (``session``); the ``Report`` that holds them all is
here, and every record is importable from here as from ``perfstack.report``.
"""

from __future__ import annotations

from typing import Any

from perfstack.records import datarecord, field
from perfstack.report.findings import (
    FIRST_RULES,
    MEASUREMENT_RULES,
    SEVERITY_ORDER,
    Finding,
    order_findings,
)
from perfstack.report.measures import Better, Layer, Metric, Quantity, Row, Status
from perfstack.report.session import BackendResult, ExitInfo, Overhead, RunInfo, RunRecord

__all__ = [
    "FIRST_RULES", "MEASUREMENT_RULES", "SCHEMA_NAME", "SCHEMA_VERSION",
    "SEVERITY_ORDER", "BackendResult", "Better", "ExitInfo", "Finding", "Layer",
    "Metric", "Overhead", "Quantity", "Report", "Row", "RunInfo", "RunRecord", "Status",
    "order_findings",
]

SCHEMA_NAME = "perfstack/report"
SCHEMA_VERSION = 3


@datarecord
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
