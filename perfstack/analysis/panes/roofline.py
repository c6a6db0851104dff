"""The roofline view: how close the ops ran to the machine, as every format shows it.

Read from what ``perfstack.analysis.roofline`` put in the report: the ceilings in the
environment, each costed row's ``attrs["roofline"]`` and the ``roofline.*`` metrics. The
ops listed are the framework rows (each op counted once: those whose cost is counted in
the op they ran in are left out), heaviest first; every placed op is a point of the HTML's
chart.
"""

from __future__ import annotations

from perfstack.analysis.roofline import ceilings_of
from perfstack.machine.roofline.ceilingrecord import Ceilings
from perfstack.records import datarecord, field
from perfstack.report import Layer, Metric, Report, Row

#: The metrics this view shows (the report's default metrics table leaves them out).
METRICS = ("roofline.peak_share", "roofline.memory_bound_share",
           "roofline.latency_bound_share", "roofline.coverage")


@datarecord
class RoofOp:
    """One op on its roofline."""

    key: str
    name: str
    kind: str | None
    dtype: str | None
    seconds: float
    time_share: float  # of the costed op time, 0..1
    flop_s: float | None
    byte_s: float | None
    intensity: float | None
    roof_share: float | None  # % of the roof it can reach at its intensity
    bound: str


@datarecord
class RoofView:
    """The ceilings, the step's figures, the heaviest ops and every placed op."""

    device: str
    ceilings: Ceilings
    peak_share: float | None
    memory_share: float | None
    latency_share: float | None
    coverage: float | None
    top: list[RoofOp]
    points: list[RoofOp] = field(default_factory=list)  # every op, for the chart
    why: str | None = None  # why no op is placed, when none is


def _metric(report: Report, name: str) -> Metric | None:
    return next((m for m in report.metrics if m.name == name), None)


def _op(row: Row, total: float) -> RoofOp:
    r = row.attrs["roofline"]

    def number(key: str) -> float | None:
        value = r.get(key)
        return float(value) if isinstance(value, (int, float)) else None

    seconds = float(r.get("seconds") or 0.0)
    kind = row.attrs.get("op_kind")
    dtype = r.get("peak_type") or row.attrs.get("dtype")
    return RoofOp(row.key, row.name, kind if isinstance(kind, str) else None,
                  dtype if isinstance(dtype, str) else None, seconds,
                  seconds / total if total else 0.0, number("flop_s"), number("byte_s"),
                  number("intensity"), number("roof_share"), str(r.get("bound") or "unknown"))


def roof_view(report: Report, top: int = 5) -> RoofView | None:
    """The roofline view, None when the report has no ceilings and no reason to show one."""
    ceilings = ceilings_of(report)
    peak = _metric(report, "roofline.peak_share")
    if not ceilings or peak is None:
        return None
    rows = [r for r in report.layers.get(Layer.FRAMEWORK, [])
            if isinstance(r.attrs.get("roofline"), dict) and not r.attrs.get("cost_in_caller")]
    device = str(rows[0].attrs["roofline"].get("device")) if rows else next(iter(ceilings))
    total = sum(float(r.attrs["roofline"].get("seconds") or 0.0) for r in rows)
    ops = sorted((_op(r, total) for r in rows), key=lambda o: -o.seconds)

    def value(name: str) -> float | None:
        m = _metric(report, name)
        return float(m.value) if m is not None and m.value is not None else None

    return RoofView(device, ceilings.get(device) or next(iter(ceilings.values())),
                    value("roofline.peak_share"), value("roofline.memory_bound_share"),
                    value("roofline.latency_bound_share"), value("roofline.coverage"),
                    ops[:top], ops, peak.reason if peak.value is None else None)


def shows(name: str) -> bool:
    """Whether the pane shows metric ``name`` (the default metrics table leaves it out)."""
    return name in METRICS


def view(report: Report, top: int, full: bool) -> RoofView | None:
    """The pane's figures (its registered entry, ``perfstack.analysis.panes.PANES``): the
    five heaviest ops, ``top`` with ``full``."""
    return roof_view(report, top=max(top, 5) if full else 5)
