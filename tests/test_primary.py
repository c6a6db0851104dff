"""A backend's declared primary value is what diff compares and what tables rank by."""

from __future__ import annotations

import copy
import json

from perfstack.analysis.diff import diff
from perfstack.analysis.primary import Primary
from perfstack.plugin.backend import Backend
from perfstack.report import BackendResult, Layer, Quantity, Report, Row, Status
from perfstack.report.files import check_report_data, load_report
from tests.conftest import ROOT


def _with_syscalls(seconds: list[float], declared: dict[str, str]) -> Report:
    """A real report (busy.py) plus a third-party backend's rows: ``seconds`` is the time of
    each syscall, ``calls`` a larger number that stays the same."""
    report = copy.deepcopy(load_report(ROOT / "tests/fixtures/reports/v1-busy.json"))
    report.layers.setdefault(Layer.KERNEL, [])
    for i, value in enumerate(seconds):
        report.layers[Layer.KERNEL].append(Row(
            f"syscall:{i}", f"call{i}", "strace",
            {"calls": Quantity(1000 + i, "count"), "seconds": Quantity(value, "s")}))
    report.backends.append(BackendResult("strace", Status.OK, ["kernel"], primary=declared))
    return report


def test_diff_compares_the_declared_value() -> None:
    base = _with_syscalls([0.10, 0.50], {"": "seconds"})
    new = _with_syscalls([0.40, 0.50], {"": "seconds"})
    rows = [r for r in diff(base, new).rows["kernel"] if r.source == "strace"]
    assert rows[0].key == "syscall:0" and rows[0].by == "seconds" and rows[0].unit == "s"
    assert abs(rows[0].change - 3.0) < 1e-9  # 0.1 s -> 0.4 s; its calls did not move


def test_without_a_declaration_seconds_are_not_guessed() -> None:
    """What an undeclared value named ``seconds`` gets: the row's first number (its calls),
    which is why a backend should declare its primary value."""
    rows = [r for r in diff(_with_syscalls([0.1], {}), _with_syscalls([0.4], {})).rows["kernel"]
            if r.source == "strace"]
    assert rows[0].by == "calls"


def test_per_kind_declarations_and_the_fallback() -> None:
    report = _with_syscalls([0.2], {"": "seconds", "thread": "calls"})
    rank = Primary(report)
    row = next(r for r in report.layers[Layer.KERNEL] if r.source == "strace")
    assert rank.name(row) == "seconds" and rank.value(row) == 0.2
    row.attrs["kind"] = "thread"
    assert rank.name(row) == "calls"
    # Undeclared rows prefer a time in seconds among the usual names.
    other = Row("k", "k", "someone", {"share": Quantity(40.0, "%"),
                                      "cpu_time": Quantity(1.5, "s")})
    assert rank.name(other) == "cpu_time"
    assert rank.name(Row("n", "n", "x", {"v": Quantity(None, "s", "not here")})) is None


def test_the_declaration_travels_in_the_report() -> None:
    class Strace(Backend):
        name = "strace"
        layers = (Layer.KERNEL,)
        primary = "seconds"

    assert Strace().primary_by_kind() == {"": "seconds"}
    report = _with_syscalls([0.2], Strace().primary_by_kind())
    data = json.loads(json.dumps(report.to_dict()))
    again = Report.from_dict(check_report_data(data, "a report"))  # the schema takes it
    assert next(b for b in again.backends if b.name == "strace").primary == {"": "seconds"}
