"""The per-step breakdown (plugins/torchprof/steps.py, perfstack/analysis/views/steps.py): each
profiled step split into phases that add up to it, outlier steps named, in every format."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

from perfstack.analysis.panes.steps import step_view
from perfstack.report import Better, Metric, Report, RunInfo
from tests.conftest import ROOT, perfstack_in

TRACES = ROOT / "tests" / "fixtures" / "gpu-traces"


def _steps(prefix: str, phases: dict[str, list[float]]) -> Report:
    run = RunInfo(command=["x.py"], cwd="/", started="2026-11-24T00:00:00", duration_s=1.0,
                  perfstack_version="0", repeat=1, warmup=0, timeout_s=None, complete=True,
                  runs=[])
    report = Report(run=run, environment={}, backends=[])
    report.metrics.extend(Metric(f"{prefix}{name}", sorted(v)[len(v) // 2], "s", "framework",
                                 "torch", Better.NEITHER, samples=v, samples_of="steps")
                          for name, v in phases.items())
    return report


def test_a_slow_step_is_named_with_the_phase_that_grew() -> None:
    report = _steps("cpu_step.", {"data": [0.1, 0.1, 0.9, 0.1, 0.1],
                                  "ops": [0.5, 0.5, 0.5, 0.5, 0.6],
                                  "other": [0.1, 0.1, 0.1, 0.1, 0.1]})
    view = step_view(report)
    assert view is not None and view.device == "cpu"
    assert view.totals == pytest.approx([0.7, 0.7, 1.5, 0.7, 0.8])
    (slow,) = view.outliers
    assert (slow.step, slow.phase) == (3, "data")
    assert slow.ratio == pytest.approx(1.5 / 0.7) and slow.extra == pytest.approx(0.8)
    # no outlier among steps within 1.5x of the median; too few steps to tell
    assert step_view(_steps("cpu_step.", {"data": [0.1] * 3, "ops": [0.5, 0.6, 0.7],
                                          "other": [0.1] * 3})).outliers == []
    assert step_view(_steps("cpu_step.", {"data": [0.1], "ops": [0.5]})) is None


def test_the_phases_shares_add_up_when_their_medians_do_not() -> None:
    """Each step slow in another phase: every phase's median is 1 ms of a 12 ms median step
    (three 8% shares, the rest nowhere, as a share of the median once printed 22% + 92% +
    4.3%). The share is of all the steps' time: a third each, adding up to 100%."""
    from perfstack.render.words.steps import step_cells

    view = step_view(_steps("cpu_step.", {"data": [0.010, 0.001, 0.001],
                                          "ops": [0.001, 0.010, 0.001],
                                          "other": [0.001, 0.001, 0.010]}))
    assert view is not None and view.median == pytest.approx(0.012)
    assert [p.median for p in view.phases] == pytest.approx([0.001] * 3)
    assert [view.share(p) for p in view.phases] == pytest.approx([100 / 3] * 3)
    assert [row[2] for row in step_cells(view)] == ["33%", "33%", "33%"]


@pytest.fixture(scope="module")
def negq(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("negq-steps")
    result = perfstack_in(folder, "analyze", str(TRACES / "a100_negq" / "rank-0.json.gz"),
                          "-o", "report.json", "-q")
    assert result.code == 0, result.stderr
    return folder / "report.json"


def test_a_gpu_traces_steps_are_split_into_phases_that_add_up(negq: Path) -> None:
    report = json.loads(negq.read_text())
    metrics = {m["name"]: m for m in report["metrics"]}
    steps = metrics["torch_step_time"]["samples"]
    parts = [metrics[f"gpu_step.{p}"]["samples"]
             for p in ("compute", "communication", "memory", "idle")]
    assert len(steps) == 5 and all(len(p) == 5 for p in parts)
    for i, step in enumerate(steps):  # the phases are the step's window on the device
        assert sum(p[i] for p in parts) == pytest.approx(step, abs=2e-6)
    wait = metrics["gpu_step.host_wait"]["samples"]
    assert all(0 <= w <= idle for w, idle in zip(wait, parts[3], strict=True))
    # the steps' compute, summed, is the whole window's compute share, and the table's
    share = metrics["gpu_time.compute"]["value"]
    assert 100 * sum(parts[0]) / sum(steps) == pytest.approx(share, abs=0.05)
    view = step_view(Report.from_dict(report))
    assert view is not None and view.share(view.phases[0]) == pytest.approx(share, abs=0.05)
    assert sum(view.share(p) or 0 for p in view.phases if not p.within) == pytest.approx(100)


def test_the_steps_read_the_same_in_text_markdown_and_html(negq: Path) -> None:
    view = step_view(Report.from_dict(json.loads(negq.read_text())))
    assert view is not None
    median = view.phases[0].median * 1e3
    text = perfstack_in(negq.parent, "show", str(negq), env={"COLUMNS": "80"}).stdout
    section = text[text.index("Steps: 5 profiled steps"):].split("\n\n")[0]
    assert "compute kernels" in section and "└ waiting for the host to launch" in section
    assert f"{median:.3g} ms" in section and all(len(ln) <= 80 for ln in section.splitlines())
    markdown = perfstack_in(negq.parent, "show", str(negq), "--format", "markdown").stdout
    assert "### Steps: 5 profiled steps" in markdown and f"| {median:.3g} ms |" in markdown
    html = perfstack_in(negq.parent, "show", str(negq), "--format", "html").stdout
    assert 'id="steps-chart"' in html
    assert html.count('class="step-part"') == 5 * 4  # every phase of every step drawn


def test_tensor_core_use_is_the_gemm_time_of_mma_kernels(negq: Path) -> None:
    from perfstack.analysis.panes.kernels import kernel_view

    report = Report.from_dict(json.loads(negq.read_text()))
    view = kernel_view(report)
    assert view is not None and 0 < view.tensor_core_s <= view.matrix_s
    tensor = sum(float(r.values["device"].value or 0) for r in report.layers["kernel"]
                 if "tensorop" in r.key)
    assert view.tensor_core_s == pytest.approx(tensor)
    text = perfstack_in(negq.parent, "show", str(negq)).stdout
    assert f"tensor cores ran {100 * view.tensor_core_s / view.matrix_s:.0f}%" in text


@functools.cache  # each trace read once per session: the tests only read the events
def _device_events(name: str):  # type: ignore[no-untyped-def]
    from perfstack_plugins.torchprof.devicerows import _device_kernels
    from perfstack_plugins.torchprof.links import Linker
    from perfstack_plugins.torchprof.opgroups import OpGroups
    from perfstack_plugins.torchprof.trace import TraceAggregate, build_trees

    agg = TraceAggregate()
    agg.add_file(TRACES / name / "rank-0.json.gz")
    trees = build_trees(agg)
    ops = OpGroups(agg, True, True, native=False)
    for tree in trees.values():
        ops.add(tree)
    return agg, _device_kernels(agg, Linker(agg, trees), ops)[3]


def test_the_launch_queue_depth_is_htas() -> None:
    """HTA's queue length on v100_ns (mean 812, max 1,022 over the events HTA keeps: launched
    from the first profiled step to the start of the last)."""
    from perfstack_plugins.torchprof.timeline import stream_times

    agg, events = _device_events("v100_ns")
    steps = agg.step_starts()
    (stream,) = stream_times(events, steps[0], steps[-1])
    assert stream.queue_max == 1022 and round(stream.queue_mean or 0) == 812


def test_each_streams_idle_is_split_by_cause_and_adds_up(negq: Path) -> None:
    from perfstack_plugins.torchprof.timeline import stream_times

    _, events = _device_events("a100_negq")
    start, end = min(e.ts for e in events), max(e.end for e in events)
    times = stream_times(events, start, end)
    assert len(times) == 6
    for t in times:
        assert t.busy + t.host + t.streams + t.other == pytest.approx(t.window)
        assert min(t.host, t.streams, t.other) >= 0
    # a stream never waits on other streams while none is busy: one stream alone cannot
    alone = stream_times([e for e in events if e.stream == times[0].stream], start, end)
    assert alone[0].streams == 0
    report = json.loads(negq.read_text())
    names = {m["name"] for m in report["metrics"]}
    assert {"gpu_stream_idle.host[stream7]", "gpu_queue_depth[stream7]",
            "gpu_queue_depth_max[stream7]", "gpu_queue_depth_max"} <= names
    text = perfstack_in(negq.parent, "show", str(negq), env={"COLUMNS": "80"}).stdout
    section = text[text.index("Streams: busy, and why each idled"):].split("\n\n")[0]
    assert "stream7" in section and "994" in section  # stream 7's deepest queue
    # A mean queue depth keeps its fraction, and reads the same in the table as its metric
    # (stream 25's 1.357 was "1.4" here and "1" in the metrics).
    from perfstack.report.units import fmt_value

    depth = next(m["value"] for m in report["metrics"] if m["name"] == "gpu_queue_depth[stream25]")
    [row] = [line for line in section.splitlines() if line.split()[:1] == ["stream25"]]
    assert fmt_value(depth, "count") == "1.36" and row.split()[-2] == "1.36", row
    assert [fmt_value(v, "count") for v in (0.5, 3.0, 12.5, 1234.5)] == ["0.5", "3", "12.5",
                                                                         "1,234"]
    assert all(len(line) <= 80 for line in section.splitlines())
    html = perfstack_in(negq.parent, "show", str(negq), "--format", "html").stdout
    assert 'id="streams"' in html


def test_a_step_is_named_by_its_number_in_the_run() -> None:
    """Steps whose metrics say their numbers (torch's ProfilerStep#N: steps 10 to 14 of the
    run) are named by them, in the outlier line and on the chart, while the chart's link
    still leads to the step by its place among the profiled ones (the third); a report that
    does not say them counts the profiled steps from 1 and says so beside the chart."""
    from perfstack_plugins.htmlreport.panes.context import PageContext
    from perfstack_plugins.htmlreport.panes.steps import overview
    from perfstack_plugins.htmlreport.tables import Tables

    from perfstack.render.words.steps import outlier_line

    report = _steps("cpu_step.", {"data": [0.1, 0.1, 0.9, 0.1, 0.1],
                                  "ops": [0.5, 0.5, 0.5, 0.5, 0.6],
                                  "other": [0.1, 0.1, 0.1, 0.1, 0.1]})
    for m in report.metrics:
        m.sample_steps = [10, 11, 12, 13, 14]
    view = step_view(report)
    assert view is not None and view.numbered and view.numbers == [10, 11, 12, 13, 14]
    (slow,) = view.outliers
    assert (slow.step, slow.index) == (12, 3)
    assert outlier_line(slow).startswith("step 12 took 2.1x the median step")
    page = overview(view, PageContext(report, Tables({}), timeline=True))
    labels = re.findall(r'data-step="(\d+)"[^>]*><text[^>]*>step (\d+)(\*?)</text>', page)
    assert labels == [("1", "10", ""), ("2", "11", ""), ("3", "12", "*"), ("4", "13", ""),
                      ("5", "14", "")]
    assert "step 12 took" in page and "does not say the steps' numbers" not in page
    for m in report.metrics:
        m.sample_steps = None
    counted = step_view(report)
    assert counted is not None and not counted.numbered and counted.numbers == [1, 2, 3, 4, 5]
    assert counted.outliers[0].step == 3
    assert "does not say the steps' numbers in the run" in overview(
        counted, PageContext(report, Tables({}), timeline=True))


def test_a_traces_steps_carry_their_profiler_step_numbers(negq: Path) -> None:
    """The A100 trace's five profiled steps are ProfilerStep#550 to #554 (read from the trace
    here, in time order): the report's step metrics say so, and the chart names them so."""
    import gzip

    with gzip.open(TRACES / "a100_negq" / "rank-0.json.gz", "rt") as fh:
        ranges = sorted((e["ts"], int(e["name"].split("#")[1]))
                        for e in json.load(fh)["traceEvents"]
                        if str(e.get("name", "")).startswith("ProfilerStep#")
                        and e.get("ph") == "X" and e.get("cat") == "user_annotation")
    numbers = [n for _, n in ranges]
    assert numbers == [550, 551, 552, 553, 554]
    report = json.loads(negq.read_text())
    family = [m for m in report["metrics"] if m["name"].startswith("gpu_step")]
    assert family and all(m["sample_steps"] == numbers for m in family)
    html = perfstack_in(negq.parent, "show", str(negq), "--format", "html").stdout
    start = html.index('id="steps-chart"')
    chart = html[start:html.index("</svg>", start)]
    assert re.findall(r">step (\d+)\*?</text>", chart) == [str(n) for n in numbers]
