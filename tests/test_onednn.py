"""The oneDNN backend: every verbose format generation, and its finding rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from perfstack_plugins.onednn import (
    ISA_RANK,
    Primitive,
    parse,
    parse_line,
    perfstack_findings,
    rows,
)

from perfstack.report import ExitInfo, Layer, Report, RunInfo
from tests.conftest import WORKLOADS, backend

FIXTURES = Path(__file__).parent / "fixtures" / "onednn"


def _parse(name: str) -> tuple[list[Primitive], list[str]]:
    return parse((FIXTURES / name).read_text().splitlines())


@pytest.mark.parametrize(("name", "execs", "conv_impl", "isa_info"), [
    ("mkldnn_v0_21_avx512.log", 3, "jit:avx512_common", "Detected ISA is Intel AVX-512"),
    ("dnnl_v1_1_avx512.log", 5, "jit:avx512_common", "Detected ISA is Intel AVX-512"),
    ("onednn_v3_2_avx2.log", 3, "ref:any", "cpu,isa:Intel AVX2"),
    ("onednn_v3_12_avx512_host.log", 24, "jit:avx512_core", "cpu,isa:Intel AVX10.1"),
    ("onednn_v3_12_max_isa_avx2.log", 26, "jit:avx2", "cpu,isa:Intel AVX2"),
])
def test_every_format_generation(name, execs, conv_impl, isa_info):
    primitives, info = _parse(name)
    assert sum(p.op == "exec" for p in primitives) == execs
    conv = next(p for p in primitives if p.kind == "convolution" and p.op == "exec")
    assert conv.impl == conv_impl
    assert conv.prop.startswith(("forward", "backward"))
    assert conv.problem.startswith("mb") and conv.time_ms > 0
    assert any(line.startswith(isa_info) for line in info)


def test_fields_of_one_line():
    line = ("onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx10_1_512_amx,"
            "forward_training,src:bf16:a:blocked:acdb::f0 wei:bf16:ap:blocked:Acdb16a::f0 "
            "bia:bf16:a:blocked:a::f0 dst:bf16:a:blocked:acdb::f0,attr-scratchpad:user,"
            "alg:convolution_direct,mb2_ic3oc8_ih16oh14kh3sh1dh0ph0_iw16ow14kw3sw1dw0pw0,0.185059")
    p = parse_line(line)
    assert isinstance(p, Primitive)
    assert (p.kind, p.isa, p.dtypes, p.time_ms) == ("convolution", "avx10_1_512_amx", ("bf16",),
                                                    0.185059)
    with_timestamp = line.replace("onednn_verbose,v1,", "onednn_verbose,1693533460193.346924,v1,")
    assert parse_line(with_timestamp) == p
    assert parse_line("onednn_verbose,v1,graph,exec,cpu,0,dnnl_backend,...,1.0") is None
    assert parse_line("hello, world") is None
    assert ISA_RANK["avx2"] < ISA_RANK["avx512_core"] < ISA_RANK["avx512_core_amx"]


def _report(primitives: list[Primitive], cpu_isa: list[str]) -> Report:
    report = Report(RunInfo([], "", "", 0.0, "", 1, 0, None, True),
                    {"cpu": {"isa": cpu_isa}, "threads": {}})
    report.layers[Layer.KERNEL] = rows(primitives)
    return report


AVX512_HOST = ["SSE4.2", "AVX", "AVX2", "FMA", "AVX-512F", "AVX-512BW", "AVX-512 VNNI",
               "AVX-512 BF16", "AMX-TILE", "AMX-BF16", "AMX-INT8"]


def test_a_per_shape_fallback_is_information_not_a_warning():
    # Recorded on an AVX-512 host: oneDNN chose jit:avx2 itself for an 8-channel backward pass.
    rules = _rules("onednn_v3_12_avx512_host.log", AVX512_HOST)
    assert "onednn.low-isa" not in rules
    finding = rules["onednn.shape-isa-fallback"]
    assert finding.severity == "info"
    assert all("backward_weights" in line for line in finding.evidence)


def test_capped_isa_is_found():
    finding = _rules("onednn_v3_12_max_isa_avx2.log", AVX512_HOST)["onednn.low-isa"]
    assert finding.severity == "warning"
    assert any("jit:avx2" in line for line in finding.evidence)
    # The same kernels on an AVX2-only machine are the best it has: no ISA finding.
    rules = _rules("onednn_v3_12_max_isa_avx2.log", ["AVX", "AVX2"])
    assert "onednn.low-isa" not in rules and "onednn.shape-isa-fallback" not in rules


def _rules(name: str, cpu: list[str]) -> dict[str, object]:
    primitives, _ = _parse(name)
    return {f.rule: f for f in perfstack_findings(_report(primitives, cpu))}


def test_reorder_heavy_runs_are_found():
    # Recorded here: tiny convolutions, so layout conversions dominate oneDNN's time.
    finding = _rules("onednn_v3_12_avx512_host.log", AVX512_HOST)["onednn.reorders"]
    assert "converting layouts" in finding.title
    # DNNL 1.1's log spends 16% and MKL-DNN 0.21's 25% of the time in reorders: no finding.
    assert "onednn.reorders" not in _rules("dnnl_v1_1_avx512.log", AVX512_HOST)
    assert "onednn.reorders" not in _rules("mkldnn_v0_21_avx512.log", AVX512_HOST)


def test_reference_kernel_is_found():
    ref = _rules("onednn_v3_2_avx2.log", ["AVX", "AVX2"])["onednn.reference-kernel"]
    assert "266.3 ms" in ref.title and "ref:any" in ref.evidence[0]


def test_backend_end_to_end_with_a_capped_isa(perfstack):
    result = perfstack("run", "-q", "--repeat", "0", "--warmup", "0", "--plugins", "onednn",
                       str(WORKLOADS.parent.parent / "workloads/unit_spatial_convolution.py"),
                       "--", "--iterations", "2", "--size", "16",
                       env={"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert result.code == 0, result.stderr
    report = result.report()
    assert backend(report, "onednn")["status"] == "ok"
    convs = [r for r in report["layers"]["kernel"] if r["attrs"]["kind"] == "convolution"]
    assert convs and all(r["attrs"]["isa"] == "avx2" for r in convs)
    if "AVX-512F" in report["environment"]["cpu"]["isa"]:
        assert any(f["rule"] == "onednn.low-isa" for f in report["findings"])
    assert report["run"]["runs"][0]["exit"] == ExitInfo("exited", 0).to_dict()
