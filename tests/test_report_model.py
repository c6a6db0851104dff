"""The report model, its JSON form and its schema."""

from __future__ import annotations

import copy

import pytest

from perfstack.errors import NotAReport
from perfstack.report import (
    BackendResult,
    Better,
    ExitInfo,
    Finding,
    Layer,
    Metric,
    Overhead,
    Quantity,
    Report,
    Row,
    RunInfo,
    RunRecord,
    Status,
)
from perfstack.report.files import load_report, save_report, schema_errors


def _report() -> Report:
    run = RunRecord("baseline-1", "baseline", None, ["python", "x.py"], "2026-01-01T00:00:00Z",
                    1.5, ExitInfo("exited", 0), {"user_s": 1.2}, "baseline-1/stdout.log")
    report = Report(
        run=RunInfo(["python", "x.py"], "/tmp", "2026-01-01T00:00:00Z", 3.0, "0.1.0", 1, 0, None,
                    True, [run]),
        environment={"python": {"version": "3.11.7"}},
        backends=[BackendResult("perf", Status.OK, ["hardware"], run="perf", wall_s=1.6,
                                overhead=Overhead(1.07, 1.5, None, 1))],
    )
    report.layers[Layer.HARDWARE] = [
        Row("cycles", "cycles", "perf",
            {"count": Quantity.unsupported("count", "<not supported>")}),
        Row("task-clock", "task clock", "perf", {"time": Quantity(1.4, "s")},
            links={"python": ["main (x.py:3)"]}),
    ]
    report.metrics = [Metric("wall_time", 1.5, "s", "run", "baseline", Better.LOWER, [1.5])]
    report.findings = [Finding("r", "t", "hardware", "info", ["e"], "a", "perf")]
    return report


def test_round_trip_through_a_file(tmp_path):
    original = _report()
    for name in ("r.json", "r.json.gz"):
        save_report(original, tmp_path / name)
        loaded = load_report(tmp_path / name)
        assert loaded.to_dict() == original.to_dict()
        assert loaded.layers[Layer.HARDWARE][0].values["count"].value is None


def test_a_nan_or_infinity_is_written_as_unknown(tmp_path):
    """The writer's C encoder refuses a NaN or an infinity; only then is the report walked
    and each made null (unknown), wherever it is: a metric's value, its samples, a fact."""
    import json
    import math

    report = _report()
    report.environment["python"]["odd"] = (-math.inf, 2.0)
    path = tmp_path / "r.json"
    save_report(report, path)
    strict = {"parse_constant": lambda c: pytest.fail(f"bare {c} in the file")}
    assert json.loads(path.read_text(), **strict)["environment"]["python"]["odd"] == [None, 2.0]
    assert load_report(path).environment["python"]["odd"] == [None, 2.0]
    report.metrics[0].value = math.nan
    report.metrics[0].samples = [1.5, math.inf]
    save_report(report, path)
    metric = json.loads(path.read_text(), **strict)["metrics"][0]
    assert metric["value"] is None and metric["samples"] == [1.5, None]


def test_schema_rejects_silent_unknowns_and_foreign_fields():
    data = _report().to_dict()
    assert schema_errors(data) == []
    bad = copy.deepcopy(data)
    del bad["layers"]["hardware"][0]["values"]["count"]["reason"]  # unknown without a reason
    assert schema_errors(bad)
    bad = copy.deepcopy(data)
    bad["metrics"][0]["better"] = "sideways"
    assert any("sideways" in e for e in schema_errors(bad))
    bad = copy.deepcopy(data)
    bad["backends"][0]["status"] = "fine"
    assert schema_errors(bad)
    bad = copy.deepcopy(data)
    bad["layers"]["hardware"][1]["links"] = {"gpu": ["x"]}  # links go to layers only
    assert schema_errors(bad)


@pytest.mark.parametrize("definition", ["row", "metric", "finding"])
def test_single_records_can_be_checked(definition):
    good = {"row": _report().layers[Layer.HARDWARE][1].to_dict(),
            "metric": _report().metrics[0].to_dict(),
            "finding": _report().findings[0].to_dict()}[definition]
    assert schema_errors(good, definition) == []
    assert schema_errors({**good, "extra": 1}, definition)


def test_exit_descriptions():
    assert ExitInfo("exited", 0).describe() == "exit 0" and ExitInfo("exited", 0).clean
    assert ExitInfo("signalled", None, 11, "SIGSEGV").describe() == "SIGSEGV"
    assert ExitInfo("timeout").describe() == "timeout" and not ExitInfo("timeout").clean


def test_durations_read_without_exponents() -> None:
    """'waiting ... 0.0% 2.04e-10 µs': a subtraction's float residue printed as a duration."""
    from perfstack.report.units import fmt_seconds

    assert fmt_seconds(2.04e-16) == "0 s" and fmt_seconds(-3e-12) == "0 s"
    assert fmt_seconds(3e-7) == "300 ns" and fmt_seconds(1e-9) == "1 ns"
    assert fmt_seconds(1.2e-6) == "1.2 µs" and fmt_seconds(0.5) == "500 ms"
    assert fmt_seconds(1640.0) == "1,640 s"
    for exponent in range(-15, 6):
        assert "e" not in fmt_seconds(10.0 ** exponent).replace("µs", "").replace(" s", "")


def test_the_report_written_in_pieces_is_the_report_encoded_whole(tmp_path):
    """``save_report`` writes a report a piece at a time (a job of thousands of ranks never
    held whole as JSON): the bytes are those of its whole encoding, on recorded reports of
    every size, with a NaN in a piece, and across more than one piece of rows and of ranks'
    facts."""
    import math

    from perfstack.report.encode import PIECE_ITEMS, finite, json_bytes, report_pieces
    from tests.conftest import ROOT

    reports = [load_report(p) for p in sorted((ROOT / "tests/fixtures/reports").glob("*.json*"))
               if p.name in {"v1-busy.json", "resnet50.json.gz", "split_60_40.json.gz"}]
    many = _report()
    many.layers[Layer.HARDWARE] = [Row(f"k{i}", f"row {i}", "perf",
                                       {"time": Quantity(i * 1e-3, "s")})
                                   for i in range(2 * PIECE_ITEMS + 7)]
    many.metrics[0].samples = [1.5, math.nan]
    many.environment = {"first": 1, "recorded": {f"rank{i}": {"devices": ["A100"], "load": (
        math.nan if i == PIECE_ITEMS + 3 else 0.5)} for i in range(2 * PIECE_ITEMS + 7)},
        "last": {"x": [1, 2]}}  # each rank's facts, written in pieces
    for report in [*reports, many, _report()]:
        whole = json_bytes(finite(report.to_dict()))
        assert b"".join(report_pieces(report)) == whole
        save_report(report, tmp_path / "r.json")
        assert (tmp_path / "r.json").read_bytes() == whole


def test_a_big_report_perfstack_wrote_is_trusted_and_a_bad_part_is_not(tmp_path, monkeypatch):
    """save_report checks each part of a report as it writes it (the head, each piece of
    rows, metrics, findings), big ones included: a report perfstack wrote and checked is read
    back without the schema's validator, whatever its size; a report with one bad part, or
    bytes changed since, is checked on reading, and the bad one refused."""
    from perfstack.report import files

    monkeypatch.setenv("PERFSTACK_CACHE_DIR", str(tmp_path / "cache"))
    big = _report()
    big.layers[Layer.FRAMEWORK] = [Row(f"op{i}", f"op {i}", "torch",
                                       {"self": Quantity(i * 1e-6, "s")}, {"shape": "x" * 120})
                                   for i in range(16_000)]
    path = tmp_path / "big.json"
    save_report(big, path)
    assert path.stat().st_size > files.BIG_JSON
    checked: list[object] = []
    real = files.check_report_data
    monkeypatch.setattr(files, "check_report_data",
                        lambda data, where: checked.append(where) or real(data, where))
    assert len(load_report(path).layers[Layer.FRAMEWORK]) == 16_000 and checked == []
    path.write_bytes(path.read_bytes().replace(b'"op 7"', b'"op 8"', 1))
    load_report(path)
    assert checked == [str(path)]  # changed bytes: checked again
    bad = _report()
    bad.layers[Layer.KERNEL] = [Row("k", "k", "torch", {"time": Quantity(1.0, "s")})]
    bad.layers[Layer.KERNEL][0].values["time"].unit = 5  # type: ignore[assignment]
    save_report(bad, tmp_path / "bad.json")
    with pytest.raises(NotAReport, match="does not match the report schema"):
        load_report(tmp_path / "bad.json")


def test_equal_facts_of_many_ranks_are_held_once() -> None:
    """A job's ranks repeat their facts: parsed apart, equal facts come back as one shared
    dict (and each container value as one), unequal ones apart: another value, a float's
    sign, a bool for an int; a value that is no JSON is kept as it is."""
    import json

    from perfstack.report.job.canon import Canon

    canon = Canon()
    text = json.dumps({"devices": [{"name": "A100", "mem": 80}], "world": 8, "ok": True,
                       "zero": 0.0, "none": None, "empty": []})
    first, second = (canon.facts(json.loads(text)) for _ in range(2))
    assert first is second and first == json.loads(text)
    assert canon.facts(json.loads(text.replace("80", "40"))) is not first
    other = canon.facts(json.loads(text.replace('"zero": 0.0', '"zero": -0.0')))
    assert other is not first and other["devices"] is first["devices"]
    assert canon.facts(json.loads(text.replace('"ok": true', '"ok": 1'))) is not first
    odd = {"when": object()}
    assert canon.facts(odd) == odd
