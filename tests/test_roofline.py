"""The roofline: ops placed against the machine's ceilings (perfstack/analysis/roofline.py),
the GPU datasheets, the ceilings' cache and probe, and the view in every format.

The figures on the shared GPU traces are checked against counts made here from the shapes
and the datasheet; the classification and the findings on rows made by hand, where the
answer is known exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfstack.analysis import roofline
from perfstack.analysis.panes.roofline import roof_view
from perfstack.analysis.rules import roofline as roofrules
from perfstack.machine.roofline import ceilings, datasheets
from perfstack.machine.roofline.ceilingrecord import Ceilings
from perfstack.report import Layer, Quantity, Report, Row, RunInfo
from tests.conftest import ROOT, perfstack_in

TRACES = ROOT / "tests" / "fixtures" / "gpu-traces"
CPU = Ceilings(device="cpu", source="measured", name="test CPU", threads=2,
               peak_flops={"fp32": 100e9, "bf16": 400e9}, bandwidth=10e9, dispatch_s=2e-6)


def _report(rows: list[Row], roofs: dict[str, Ceilings] | None = None) -> Report:
    run = RunInfo(command=["x.py"], cwd="/", started="2026-11-24T00:00:00", duration_s=1.0,
                  perfstack_version="0", repeat=1, warmup=0, timeout_s=None, complete=True,
                  runs=[])
    report = Report(run=run, environment={"ceilings": {
        d: c.as_dict() for d, c in (roofs if roofs is not None else {"cpu": CPU}).items()}},
        backends=[])
    report.layers[Layer.FRAMEWORK].extend(rows)
    return report


def _op(name: str, seconds: float, flops: float | None, moved: float | None, calls: int = 10,
        dtype: str = "fp32", kind: str = "matmul", **attrs: object) -> Row:
    values = {"total": Quantity(seconds, "s"), "self": Quantity(seconds, "s"),
              "calls": Quantity(calls, "count")}
    if flops is not None:
        values["flops"] = Quantity(flops, "flop")
    if moved is not None:
        values["bytes"] = Quantity(moved, "B")
    return Row(name, name, "torch", values, {"op": name.split()[0], "dtype": dtype,
                                             "op_kind": kind, **attrs})


def test_an_op_is_bound_by_the_lower_roof_at_its_intensity() -> None:
    # ridge: 100 GFLOP/s / 10 GB/s = 10 FLOP per byte
    big = _op("aten::mm [[2048, 2048], [2048, 2048]]", 0.2, 17.18e9, 50.3e6)  # 341 FLOP/B
    add = _op("aten::add [[1e8]]", 0.15, 1e8, 1.2e9, kind="elementwise")  # 0.083 FLOP/B
    tiny = _op("aten::mul [[8]]", 0.01, 8 * 10_000, 96 * 10_000, calls=10_000,
               kind="elementwise")  # 96 bytes a call: 9.6 ns at 10 GB/s, under 2 µs
    (p_big, p_add, p_tiny) = [roofline.place(r, Layer.FRAMEWORK, {"cpu": CPU})
                              for r in (big, add, tiny)]
    assert p_big is not None and p_big.bound == "compute"
    assert p_big.share == pytest.approx(17.18e9 / 0.2 / 100e9)  # 86% of the fp32 peak
    assert p_add is not None and p_add.bound == "memory"
    assert p_add.share == pytest.approx(1.2e9 / 0.15 / 10e9)  # 80% of the bandwidth
    assert p_tiny is not None and p_tiny.bound == "latency"
    # no ceilings for the device, or no cost: not placed (unknown, not zero)
    assert roofline.place(big, Layer.FRAMEWORK, {}) is None
    assert roofline.place(_op("aten::linear", 1.0, None, None), Layer.FRAMEWORK,
                          {"cpu": CPU}) is None
    # a copy between host and device is the link's, not the memory's
    assert roofline.place(_op("aten::copy_", 1.0, 0, 1e9, transfer="host"), Layer.FRAMEWORK,
                          {"cpu": CPU}) is None


def test_the_steps_figures_count_each_op_once() -> None:
    rows = [_op("aten::mm [[2048, 2048], [2048, 2048]]", 0.2, 17.18e9, 50.3e6),
            _op("aten::add [[1e8]]", 0.2, 1e8, 1.2e9, kind="elementwise"),
            # counted in the op it ran in: out of the sums
            _op("aten::native_layer_norm [[1e6]]", 5.0, 8e6, 8e6, kind="normalisation",
                cost_in_caller=True)]
    report = _report(rows)
    metrics, found = roofrules.annotate(report)
    by = {m.name: m.value for m in metrics}
    # (17.18e9 / 100e9 + 1e8 / 100e9) / 0.4 s
    assert by["roofline.peak_share"] == pytest.approx(100 * (0.1718 + 0.001) / 0.4)
    assert by["roofline.memory_bound_share"] == pytest.approx(50.0)
    assert by["roofline.latency_bound_share"] == 0
    assert rows[0].values["roof"].value == pytest.approx(100 * 17.18e9 / 0.2 / 100e9)
    assert rows[0].attrs["roofline"]["bound"] == "compute"
    # half the op time is fp32 compute, and bf16 runs 4x faster here
    assert [f.rule for f in found] == ["roofline.fuse-elementwise", "roofline.lower-precision"]
    assert "bf16 runs 4.0x faster" in found[1].title


def test_a_heavy_op_far_below_its_roof_is_a_finding_that_names_its_shapes() -> None:
    slow = _op("aten::mm [[16, 4096], [4096, 16]]", 1.0, 2 * 16 * 16 * 4096 * 1000, 1e6,
               input_dims=[[16, 4096], [4096, 16]])  # 2 GFLOP/s of compute-bound work
    report = _report([slow])
    _, found = roofrules.annotate(report)
    (far,) = [f for f in found if f.rule == "roofline.far-below-roof"]
    assert "2.1% of what this machine can reach" in far.title and "compute-bound" in far.title
    assert "small" in far.action and "[[16, 4096], [4096, 16]]" in " ".join(far.evidence)


def test_one_op_far_below_its_roof_in_many_shapes_is_one_finding() -> None:
    """aten::mm in three shapes, each far below its roof: one finding that lists the three,
    the heaviest first (it was three findings with one title each)."""
    shapes = ([[16, 4096], [4096, 16]], [[8, 4096], [4096, 16]], [[4, 4096], [4096, 16]])
    rows = [_op(f"aten::mm {dims}", 1.0 - 0.1 * i, 2e9 * (1 - 0.1 * i), 1e6,
                input_dims=dims) for i, dims in enumerate(shapes)]
    _, found = roofrules.annotate(_report(rows))
    (far,) = [f for f in found if f.rule == "roofline.far-below-roof"]
    assert far.title.startswith("aten::mm in 3 shapes ran far below what this machine can reach")
    assert [e.rsplit(": ", 1)[0] for e in far.evidence] == [r.name for r in rows]
    assert far.action.startswith("the heaviest: its matrices are small")


def test_no_ceilings_or_no_shapes_say_why() -> None:
    costed = _report([_op("aten::mm [[4, 4], [4, 4]]", 1.0, 128, 192)], roofs={})
    costed.environment["ceilings_unknown"] = "PERFSTACK_CEILINGS=off"
    metrics, _ = roofrules.annotate(costed)
    assert metrics[0].value is None and "PERFSTACK_CEILINGS=off" in (metrics[0].reason or "")
    shapeless = _report([Row("aten::mm", "aten::mm", "torch", {"total": Quantity(1.0, "s")},
                             {"op": "aten::mm"})])
    metrics, _ = roofrules.annotate(shapeless)
    assert metrics[0].value is None and "no input shapes" in (metrics[0].reason or "")


@pytest.mark.parametrize("props, model", [
    ({"name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_198_045_184}, "A100 SXM4 80GB"),
    ({"name": "NVIDIA A100-PG509-200", "totalGlobalMem": 42_297_524_224}, "A100 SXM4 40GB"),
    ({"name": "Tesla V100-SXM2-32GB"}, "V100 SXM2"),
    ({"name": "Tesla V100-PCIE-16GB"}, "V100 PCIe"),
    ({"name": "NVIDIA H100 80GB HBM3"}, "H100 SXM5"),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "numSms": 104,
      "warpSize": 64}, "MI250 (one GCD)"),
])
def test_datasheets_know_the_gpus_of_the_shared_traces(props: dict[str, object],
                                                       model: str) -> None:
    sheet = datasheets.identify(props)
    assert sheet is not None and model in sheet.model
    assert datasheets.identify({"name": "Some Future GPU"}) is None


@pytest.fixture(scope="module")
def negq(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    folder = tmp_path_factory.mktemp("negq")
    result = perfstack_in(folder, "analyze", str(TRACES / "a100_negq" / "rank-0.json.gz"),
                          "-o", "report.json", "-q")
    assert result.code == 0, result.stderr
    report: dict[str, object] = result.report("report.json")
    return report


def test_a_recorded_a100_trace_is_measured_against_the_a100_datasheet(negq: dict) -> None:
    gpu = negq["environment"]["ceilings"]["gpu"]
    assert gpu["source"] == "datasheet" and gpu["name"] == "NVIDIA A100 SXM4 80GB"
    assert gpu["bandwidth"] == 2039e9 and gpu["peak_flops"]["fp32"] == 19.5e12
    rows = {r["key"]: r for r in negq["layers"]["framework"]}
    copy = rows["aten::copy_ [[4, 4096, 2798], [4, 4096, 2798], []]"]
    # 25 copies of a 4x4096x2798 fp32 tensor: each read once and written once
    moved = 25 * 2 * 4 * 4096 * 2798 * 4
    assert copy["values"]["bytes"]["value"] == moved
    seconds = copy["values"]["device"]["value"]
    assert copy["attrs"]["roofline"]["bound"] == "memory"
    assert copy["values"]["roof"]["value"] == pytest.approx(100 * moved / seconds / 2039e9)
    # a GEMM on tensor cores is measured against the TF32 peak, not the plain fp32 one
    gemms = [r for r in negq["layers"]["kernel"] if r["attrs"].get("tensor_cores")]
    assert gemms and all("tensorop" in r["key"] for r in gemms)


def test_a_trace_without_shapes_says_why_it_has_no_roofline(tmp_path: Path) -> None:
    result = perfstack_in(tmp_path, "analyze", str(TRACES / "v100_ns" / "rank-0.json.gz"),
                          "-o", "r.json", "-q")
    assert result.code == 0, result.stderr
    report = result.report("r.json")
    assert report["environment"]["ceilings"]["gpu"]["name"] == "NVIDIA V100 SXM2"
    (peak,) = [m for m in report["metrics"] if m["name"] == "roofline.peak_share"]
    assert peak["value"] is None and "no input shapes" in peak["reason"]
    text = perfstack_in(tmp_path, "show", "r.json").stdout
    assert "How close to the machine: unknown" in text
    assert "ceilings of NVIDIA V100 SXM2, NVIDIA Tesla V100 GPU datasheet" in text
    assert "record_shapes was off" in text


def test_the_view_reads_the_same_in_text_markdown_and_html(negq: dict, tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(negq))
    report = Report.from_dict(negq)
    view = roof_view(report)
    assert view is not None and view.top[0].roof_share is not None
    first = f"{view.top[0].roof_share:.0f}%"
    text = perfstack_in(tmp_path, "show", str(path), env={"COLUMNS": "80"}).stdout
    section = text[text.index("How close to the machine"):]
    assert section.splitlines()[0].endswith("% of its peak")
    assert "ceilings of NVIDIA A100 SXM4 80GB" in section.splitlines()[1]
    assert all(len(line) <= 80 for line in section.splitlines()[:14])
    assert first in section and "memory" in section
    markdown = perfstack_in(tmp_path, "show", str(path), "--format", "markdown").stdout
    assert "### How close to the machine" in markdown and f"| {first} | memory |" in markdown
    html = perfstack_in(tmp_path, "show", str(path), "--format", "html").stdout
    assert 'id="roofline-chart"' in html and first in html
    drawn = [p for p in view.points if p.flop_s and p.intensity]
    assert html.count('class="roof-op"') == len(drawn) > 0
    # the default metrics table leaves the section's figures to it
    assert "roofline.peak_share" not in text[:text.index("How close")]


def test_ceilings_round_trip_and_a_malformed_file_reads_as_none(tmp_path: Path,
                                                                monkeypatch) -> None:
    assert Ceilings.from_dict(CPU.as_dict()) == CPU
    with pytest.raises(ValueError):
        Ceilings.from_dict({"peak_flops": 3})
    good, bad = tmp_path / "c.json", tmp_path / "bad.json"
    good.write_text(json.dumps(CPU.as_dict()))
    bad.write_text("{not json")
    monkeypatch.setenv(ceilings.CEILINGS_ENV, str(good))
    assert ceilings.cached(2) == CPU
    monkeypatch.setenv(ceilings.CEILINGS_ENV, str(bad))
    assert ceilings.cached(2) is None
    monkeypatch.setenv(ceilings.CEILINGS_ENV, "off")
    assert ceilings.cached(2) is None


def test_the_probe_measures_and_the_cache_keeps_it_per_thread_count(tmp_path: Path,
                                                                    monkeypatch) -> None:
    """The real probe in its own process, on small sizes (its figures are then no peaks:
    bench/roofline.py measures the real ones)."""
    monkeypatch.setenv("PERFSTACK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(ceilings.CEILINGS_ENV, raising=False)
    found = ceilings.measure(1, probe_args=("--sizes", "64,128", "--array-mib", "8"))
    assert found.source == "measured" and found.threads == 1
    assert found.peak_flops["fp32"] > 0 and found.bandwidth and found.dispatch_s
    assert {"fp32", "fp64"} <= set(found.peak_flops)
    assert ceilings.cached(1) == found
    assert ceilings.cached(2) is None  # another thread count is another machine
    assert list(tmp_path.glob("ceilings/cpu-*.json"))


def test_rates_and_small_shares_read_without_exponents() -> None:
    from perfstack.report.units import fmt_si, fmt_value, pct_fine

    assert fmt_si(19.5e12, "flop/s") == "19.5 TFLOP/s" and fmt_si(2039e9, "B/s") == "2.04 TB/s"
    assert fmt_value(1_536_000, "flop") == "1.54 MFLOP"
    assert pct_fine(0.00029) == "0.00029%" and pct_fine(74.3) == "74%"
    assert pct_fine(1e-12) == "<0.0001%" and fmt_value(0.0123, "%") == "0.012%"


def test_diff_compares_the_efficiency_of_two_reports() -> None:
    """The same product twice as slow: its share of the peak halves, and diff says so."""
    from perfstack.analysis.diff import diff

    def one(seconds: float) -> Report:
        report = _report([_op("aten::mm [[2048, 2048], [2048, 2048]]", seconds, 17.18e9,
                              50.3e6)])
        report.metrics.extend(roofrules.annotate(report)[0])
        return report

    d = diff(one(0.2), one(0.4))
    (peak,) = [m for m in d.metrics if m.name == "roofline.peak_share"]
    assert peak.base == pytest.approx(85.9) and peak.new == pytest.approx(42.95)
    assert peak.change == pytest.approx(-0.5)


def test_an_op_whose_data_fits_in_the_cache_is_cache_bound() -> None:
    """A memory-bound op that moves less than the last-level cache per call can run above the
    memory roof: its bound says the caches served it."""
    cpu = Ceilings.from_dict({**CPU.as_dict(), "how": {"memory": {"last_level_cache": 1 << 20}}})
    small = _op("aten::add_ [[256, 256], [256, 256]]", 0.001, 65536 * 10, 786432 * 10,
                kind="elementwise")  # 768 KiB a call, 7.9 GB/s of a 10 GB/s roof
    big = _op("aten::add_ [[4096, 4096], [4096, 4096]]", 0.2, 16.8e6, 201e6,
              kind="elementwise", calls=1)  # 192 MiB a call
    (p_small, p_big) = [roofline.place(r, Layer.FRAMEWORK, {"cpu": cpu}) for r in (small, big)]
    assert p_small is not None and p_small.bound == "cache"
    assert p_big is not None and p_big.bound == "memory"


def test_a_cache_bound_op_over_the_memory_roof_says_where_its_data_was() -> None:
    """The fuse finding's evidence: a cache-bound op that ran at twice the memory roof says
    it is the memory roof it passed, its data in the cache (a bare '200% of its roof' read
    as a measuring error); a memory-bound one keeps 'of its roof'."""
    cpu = Ceilings.from_dict({**CPU.as_dict(), "how": {"memory": {"last_level_cache": 1 << 20}}})
    hot = _op("aten::add_ [[256, 256], [256, 256]]", 0.2, 65536 * 5000, 786432 * 5000,
              kind="elementwise", calls=5000)  # 3.9 GB in 0.2 s: 197% of 10 GB/s
    cold = _op("aten::add_ [[4096, 4096], [4096, 4096]]", 0.2, 16.8e6 * 5, 201e6 * 5,
               kind="elementwise", calls=5)  # 1 GB in 0.2 s: 50%
    _, found = roofrules.annotate(_report([hot, cold], {"cpu": cpu}))
    (fuse,) = [f for f in found if f.rule == "roofline.fuse-elementwise"]
    assert fuse.evidence == [
        "aten::add_ [[256, 256], [256, 256]]: 50%, 197% of the memory roof (its data fits in "
        "the cache)",
        "aten::add_ [[4096, 4096], [4096, 4096]]: 50%, 50% of its roof"]


# --- Ceilings that an op runs above are wrong: said, measured again, the best kept ---------

GPU_RESNET = ROOT / "tests" / "fixtures" / "gpu-runs" / "resnet" / "report.json.gz"


def test_fp32_convolutions_on_a_gpu_are_held_to_the_tf32_peak() -> None:
    """The H200 run: cuDNN ran resnet50's fp32 convolutions on the tensor cores (TF32,
    torch's default for cuDNN), up to 3.5x the measured fp32 peak (49.7 TFLOP/s). Against
    ceilings without a TF32 peak the report says the ceiling is too low (a share over 100%
    never stands as a figure); with one, every convolution is under its roof."""
    from perfstack.report.files import load_report

    report = load_report(GPU_RESNET)
    gpu = roofline.ceilings_of(report)["gpu"]
    assert "tf32" not in gpu.peak_flops  # measured before the probe measured TF32
    found = roofrules.annotate(report)[1]
    low = next(f for f in found if f.rule == "roofline.ceiling-low")
    assert "fp32 peak" in low.title and "aten::conv2d" in low.evidence[0]
    with_tf32 = Ceilings(gpu.device, gpu.source, {**gpu.peak_flops, "tf32": 494e12},
                         gpu.bandwidth, gpu.dispatch_s, gpu.name, gpu.threads, gpu.how)
    convs = [roofline.place(r, Layer.FRAMEWORK, {"gpu": with_tf32})
             for r in report.layers[Layer.FRAMEWORK] if r.name.startswith("aten::conv2d")]
    placed = [p for p in convs if p is not None and p.share is not None]
    assert placed and all(p.peak_name == "tf32" for p in placed)
    assert max(p.share for p in placed) <= roofline.DOUBT
    # A workload that turned TF32 off for cuDNN is held to fp32 (its slower convs included).
    off = roofline.tf32_allowed({"torch": {"cudnn_allow_tf32": False}})
    assert "conv" not in off and roofline.tf32_allowed({}) == roofline.TF32_DEFAULT


def test_the_cache_keeps_the_best_of_its_measurements() -> None:
    """A ceiling measured under load reads low (fp32 55.6 GFLOP/s where torch's own sgemm
    reached 117 on that machine): measured again, each figure keeps its best, and every
    measurement is kept with the load it ran under."""
    busy = Ceilings("cpu", "measured", {"fp32": 55.6e9, "bf16": 300e9}, 20e9, 3e-6,
                    how={"measured": "a", "load": {"others_cpus": 1.4, "steal": 0.0}})
    quiet = Ceilings("cpu", "measured", {"fp32": 117e9, "bf16": 280e9}, 18e9, 2e-6,
                     how={"measured": "b", "load": {"others_cpus": 0.0, "steal": 0.0}})
    best = ceilings.best_of(busy, quiet)
    assert best.peak_flops == {"fp32": 117e9, "bf16": 300e9}
    assert best.bandwidth == 20e9 and best.dispatch_s == 2e-6
    assert [m["measured"] for m in best.how["measurements"]] == ["a", "b"]
    assert best.how["measurements"][0]["load"]["others_cpus"] == 1.4


def test_an_op_above_its_roof_or_a_ceiling_measured_under_load_is_doubted() -> None:
    from perfstack.plugin.backend import Collected
    from perfstack.run.ceilingstep import doubted

    fast = _op("aten::mm [[512, 512], [512, 512]]", 1e-3, 200e6, 3e6, calls=1)  # 200 GFLOP/s
    collected = [Collected(rows={Layer.FRAMEWORK: [fast]})]
    assert "ran at 200% of the measured fp32 peak" in (doubted(CPU, collected, "cpu") or "")
    roomy = Ceilings("cpu", "measured", {"fp32": 400e9}, 10e9, 2e-6,
                     how={"load": {"others_cpus": 0.0}})
    assert doubted(roomy, collected, "cpu") is None
    loaded = Ceilings("cpu", "measured", {"fp32": 400e9}, 10e9, 2e-6,
                      how={"load": {"others_cpus": 1.5}})
    assert "other programs kept 1.5 CPUs busy" in (doubted(loaded, collected, "cpu") or "")
