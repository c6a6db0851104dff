"""The value-pattern analysis on GVProf's one-kernel units: real runs, real findings."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import WORKLOADS, backend, perfstack_in

pytest.importorskip("torch")
RUN = ("run", "-q", "--repeat", "0", "--warmup", "0", "--plugins", "valuepatterns")


def _rows(report):
    return {r["key"]: r for r in report["layers"]["framework"] if r["source"] == "valuepatterns"}


@pytest.fixture(scope="module")
def units(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of the three units (tests/workloads/value_units.py runs each as it runs
    alone): the analysis reads every op of all three."""
    result = perfstack_in(tmp_path_factory.mktemp("units"), *RUN,
                          str(WORKLOADS / "value_units.py"), timeout=300)
    assert result.code == 0, result.stderr
    report = result.report()
    assert backend(report, "valuepatterns")["status"] == "ok"
    return report


def _titles(report: dict[str, Any]) -> list[str]:
    return [f["title"] for f in report["findings"] if f["rule"] == "values.mostly-zeros"]


def test_embedding_gradient_is_mostly_zeros(units: dict[str, Any]) -> None:
    rows = _rows(units)
    assert rows["aten::embedding_dense_backward"]["values"]["zero_share"]["value"] > 90
    assert "aten::empty" not in rows  # uninitialized memory says nothing
    assert any("aten::embedding_dense_backward" in t for t in _titles(units))


def test_replication_pad_on_a_sparse_wavefield(units: dict[str, Any]) -> None:
    titles = _titles(units)
    assert any("aten::replication_pad3d_backward" in t for t in titles)
    assert any("aten::replication_pad3d'" in t for t in titles)
    assert not any("aten::zeros" in t for t in titles)  # constant by design: not flagged


def test_dense_convolution_has_no_redundancy_finding(units: dict[str, Any]) -> None:
    conv = [r for r in _rows(units) if "conv" in r]
    assert conv, sorted(_rows(units))  # the convolution's ops were read...
    flagged = [f["title"] for f in units["findings"] if f["rule"].startswith("values.")
               and "conv" in f["title"]]
    assert not flagged  # ...and none of them writes redundant values


def test_it_is_opt_in(plugins):
    backends, _ = plugins.backends()
    assert backends["valuepatterns"].backend.opt_in
