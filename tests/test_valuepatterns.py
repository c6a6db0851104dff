"""The value-pattern analysis on GVProf's one-kernel units: real runs, real findings."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, backend

pytest.importorskip("torch")
RUN = ("run", "-q", "--repeat", "0", "--warmup", "0", "--plugins", "valuepatterns")


def _rows(report):
    return {r["key"]: r for r in report["layers"]["framework"] if r["source"] == "valuepatterns"}


def test_embedding_gradient_is_mostly_zeros(perfstack):
    result = perfstack(*RUN, str(ROOT / "workloads/unit_embedding.py"), "--", "--iterations", "3")
    assert result.code == 0, result.stderr
    report = result.report()
    assert backend(report, "valuepatterns")["status"] == "ok"
    rows = _rows(report)
    assert rows["aten::embedding_dense_backward"]["values"]["zero_share"]["value"] > 90
    assert "aten::empty" not in rows  # uninitialized memory says nothing
    finding = next(f for f in report["findings"] if f["rule"] == "values.mostly-zeros")
    assert "aten::embedding_dense_backward" in finding["title"]


def test_replication_pad_on_a_sparse_wavefield(perfstack):
    result = perfstack(*RUN, str(ROOT / "workloads/unit_replication_pad3d.py"), "--",
                       "--iterations", "2", "--size", "32")
    assert result.code == 0, result.stderr
    report = result.report()
    titles = [f["title"] for f in report["findings"] if f["rule"] == "values.mostly-zeros"]
    assert any("aten::replication_pad3d_backward" in t for t in titles)
    assert any("aten::replication_pad3d'" in t for t in titles)
    assert not any("aten::zeros" in t for t in titles)  # constant by design: not flagged


def test_dense_convolution_has_no_redundancy_finding(perfstack):
    result = perfstack(*RUN, str(ROOT / "workloads/unit_spatial_convolution.py"), "--",
                       "--iterations", "2", "--size", "16")
    assert result.code == 0, result.stderr
    assert not [f for f in result.report()["findings"] if f["rule"].startswith("values.")]


def test_it_is_opt_in(plugins):
    backends, _ = plugins.backends()
    assert backends["valuepatterns"].backend.opt_in
