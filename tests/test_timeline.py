"""Issue 66: the HTML report's Timeline pane, opened offline in Chromium as a user would: the
H200 run's ResNet-50 report (tests/fixtures/gpu-runs/resnet/: torch's trace of 5 steps with
its CUDA kernels, NVML's counters), zoomed, panned, clicked, searched and a range selected,
each figure checked against the trace read here on its own."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from perfstack.report import Layer
from perfstack.report.files import load_report
from plugins.htmlreport.timelinefiles import unpack
from tests.conftest import ROOT, perfstack_in
from tests.test_html_browser import (  # noqa: F401 (a fixture)
    _console_errors,
    _open,
    _pane,
    _seconds,
    browser,
)

RESNET = ROOT / "tests" / "fixtures" / "gpu-runs" / "resnet"


@pytest.fixture(scope="module")
def resnet_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ResNet-50 run folder as perfstack left it (its trace uncompressed, as written),
    and the page `perfstack show --format html` makes of its report."""
    folder = tmp_path_factory.mktemp("timeline") / "resnet"
    shutil.copytree(RESNET, folder)
    for packed in folder.rglob("*.gz"):
        if packed.name != "report.json.gz":
            with gzip.open(packed, "rb") as src, open(packed.with_suffix(""), "wb") as out:
                shutil.copyfileobj(src, out)
    page = folder / "report.html"
    done = perfstack_in(folder, "show", "report.json.gz", "--format", "html", "-o", str(page))
    assert done.code == 0, done.stderr
    return page


def _data(page: Path) -> dict[str, Any]:
    text = page.read_text("utf-8")
    def packed(element: str) -> Any:
        start = text.index(f'id="{element}">') + len(f'id="{element}">')
        return unpack(text[start:text.index("</script>", start)])

    data: dict[str, Any] = packed("perfstack-timeline")
    recorded = packed("perfstack-timeline-notes")
    data["notes"] = recorded["notes"]
    for track, args in zip(data["tracks"], recorded["args"], strict=True):
        track["args"] = args
    return data


def _union(spans: list[tuple[float, float]], a: float, b: float) -> float:
    """The length of the union of ``spans`` clipped to [a, b]."""
    total, reach = 0.0, a
    for s, e in sorted(spans):
        s, e = max(s, reach), min(e, b)
        if e > s:
            total += e - s
            reach = e
    return total


def test_the_timeline_holds_every_layer_on_one_axis(resnet_page: Path) -> None:
    """Each run's steps first, then its threads before the GPU stream, the stream's kernels
    (never Kineto's device-side step ranges), NVML's four counters and each run's resident
    memory after each step; each kernel of the trace is a slice of the stream."""
    data = _data(resnet_page)
    tracks = data["tracks"]
    names = [t["name"] for t in tracks]
    assert names[0] == "steps"
    assert names.index("thread 774 (python3)") < names.index("stream 7 ")
    counters = [t["name"] for t in tracks if t["kind"] == "counter"]
    assert sorted(counters) == sorted([*(f"GPU 0 {what}" for what in (
        "GPU memory bandwidth utilisation (%)", "GPU memory used (B)", "GPU power (W)",
        "GPU utilisation (%)")), "RSS after each step (B)", "RSS after each step (B)"])
    stream = next(t for t in tracks if t["name"] == "stream 7 ")
    on_stream = [data["names"][i] for i in stream["name_id"]]
    assert not any(n.startswith("ProfilerStep") for n in on_stream)
    with gzip.open(RESNET / "torch" / "vm_774.0.pt.trace.json.gz", "rt") as fh:
        trace = json.load(fh)["traceEvents"]
    kernels = [e for e in trace if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert len(on_stream) == len(kernels)


def test_pan_zoom_click_search_and_select_in_chromium(browser: WebDriver,  # noqa: F811
                                                      resnet_page: Path) -> None:
    """Keys zoom and pan; a click on a step's slice names it; a search counts what it
    highlights; a selected step's busy share of the stream is the union of its kernels there,
    and its top kernel the one with the most time in it."""
    data = _data(resnet_page)
    _open(browser, resnet_page)
    _pane(browser, "timeline")
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script("return window.perfstackTimeline.draws") > 0)
    view = browser.execute_script("return window.perfstackTimeline.view()")
    home = data["home"]
    assert (view["a"], view["b"]) == pytest.approx((home[0], home[1]))
    canvas = browser.find_element(By.ID, "timeline-canvas")
    canvas.send_keys("w")
    zoomed = browser.execute_script("return window.perfstackTimeline.view()")
    assert zoomed["b"] - zoomed["a"] == pytest.approx(0.8 * (view["b"] - view["a"]))
    canvas.send_keys("d")
    panned = browser.execute_script("return window.perfstackTimeline.view()")
    assert panned["a"] - zoomed["a"] == pytest.approx(0.2 * (zoomed["b"] - zoomed["a"]))
    canvas.send_keys("0")

    # a click on ProfilerStep#4, the main thread's top lane
    main = next(t for t in data["tracks"] if t["name"] == "thread 774 (python3)")
    step = next(i for i, n in enumerate(main["name_id"])
                if data["names"][n] == "ProfilerStep#4")
    s, d = main["ts"][step], main["dur"][step]
    x, y = browser.execute_script(
        "var v = window.perfstackTimeline.view(), c = arguments[0], w = c.clientWidth;"
        "return [190 + (arguments[1] - v.a) / (v.b - v.a) * (w - 190),"
        " window.perfstackTimeline.laneY('thread 774 (python3)', 0)];", canvas, s + d / 2)
    left, top = int(x - canvas.size["width"] / 2), int(y - canvas.size["height"] / 2)
    ActionChains(browser).move_to_element_with_offset(canvas, left, top).click().perform()
    details = browser.find_element(By.ID, "timeline-details").text
    assert "ProfilerStep#4" in details and "thread 774" in details

    search = browser.find_element(By.ID, "timeline-search")
    search.send_keys("ProfilerStep")
    expected = sum(1 for t in data["tracks"] if t["kind"] == "slices"
                   for n in t["name_id"] if "profilerstep" in data["names"][n].lower())
    assert browser.execute_script("return window.perfstackTimeline.matches") == expected

    summary = browser.execute_script("return window.perfstackTimeline.select(arguments[0], "
                                     "arguments[1])", s, s + d)
    stream = next(t for t in data["tracks"] if t["name"] == "stream 7 ")
    row = next(r for r in summary if r["track"] == "stream 7 ")
    spans = [(a, a + b) for a, b, depth in zip(stream["ts"], stream["dur"], stream["depth"],
                                               strict=True) if depth == 0]
    assert row["busy"] == pytest.approx(_union(spans, s, s + d) / d, abs=1e-9)
    own: dict[str, float] = {}
    for a, b, o, n in zip(stream["ts"], stream["dur"], stream["own"], stream["name_id"],
                          strict=True):
        inside = min(a + b, s + d) - max(a, s)
        if inside > 0 and b > 0:
            own[data["names"][n]] = own.get(data["names"][n], 0.0) + o * inside / b
    assert row["top"][0][0] == max(own, key=lambda k: own[k])
    assert row["top"][0][1] == pytest.approx(max(own.values()))
    assert "busy" in browser.find_element(By.ID, "timeline-selection").text
    shots = os.environ.get("PERFSTACK_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(shots) / "timeline-resnet.png"))


def test_a_page_opened_on_its_timeline_draws_it_before_the_rest(browser: WebDriver,  # noqa: F811
                                                                resnet_page: Path) -> None:
    """Opened at #pane-timeline (a job's page, linked to its timeline), the page draws the
    timeline first and sets up its tables and flame graph after that draw; every other pane
    then works as on a page opened at its overview: a tab's table has its rows."""
    browser.set_window_size(1400, 1000)
    browser.get("about:blank")  # (a page already open would only change its hash)
    browser.get(resnet_page.resolve().as_uri() + "#pane-timeline")
    WebDriverWait(browser, 60).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    drawn, ready, draws = browser.execute_script(
        "return [window.perfstackTimeline.sinceNavigationMs, window.perfstackReport.readyMs,"
        " window.perfstackTimeline.draws]")
    assert draws >= 1 and ready > drawn
    body = browser.find_element(By.TAG_NAME, "body")
    assert body.get_attribute("data-errors") is None, body.get_attribute("data-errors")
    ops = _pane(browser, "ops")
    assert len(ops.find_elements(By.CSS_SELECTOR, "table tbody tr")) > 10
    assert browser.find_element(By.ID, "pane-timeline").is_displayed() is False


def test_a_report_without_a_trace_has_no_timeline_pane(tmp_path: Path) -> None:
    """A report whose backends kept nothing on a time axis (a recorded report moved without
    its run folder) shows no empty pane."""
    from perfstack.plugin.load import load_plugins
    from perfstack.plugin.renderer import RenderOptions

    report = load_report(ROOT / "tests" / "fixtures" / "reports" / "late_import.json.gz")
    html = load_plugins().renderers()["html"].render(report, RenderOptions(
        report_dir=tmp_path))
    assert 'id="pane-timeline"' not in html and "timeline.js" not in html


def test_an_op_row_leads_to_its_calls_on_the_timeline(browser: WebDriver,  # noqa: F811
                                                      resnet_page: Path) -> None:
    """The Ops pane's convolution row, clicked, offers its calls on the timeline; followed,
    the Timeline pane opens zoomed to the op's first call, named in the details, with every
    call of it highlighted and counted."""
    data = _data(resnet_page)
    _open(browser, resnet_page)
    pane = _pane(browser, "ops")
    row = next(r for r in pane.find_elements(By.CSS_SELECTOR, "tr.clickable")
               if (r.get_attribute("data-key") or "").split(" [")[0] == "aten::convolution")
    row.click()
    link = row.find_element(By.XPATH, "following-sibling::tr[@class='detail']//a[@data-pane="
                                      "'pane-timeline']")
    link.click()
    assert browser.find_element(By.ID, "pane-timeline").is_displayed()
    calls = [(t["ts"][i], t, i) for t in data["tracks"] if t["kind"] == "slices"
             for i, n in enumerate(t["name_id"]) if data["names"][n] == "aten::convolution"]
    # the data is read after the click: the search waits for it
    WebDriverWait(browser, 20).until(
        lambda d: d.execute_script("return window.perfstackTimeline.matches") is not None)
    assert browser.execute_script("return window.perfstackTimeline.matches") >= len(calls)
    first, track, index = min(calls, key=lambda c: c[0])
    view = browser.execute_script("return window.perfstackTimeline.view()")
    assert view["a"] <= first <= view["b"]
    assert "aten::convolution" in browser.find_element(By.ID, "timeline-details").text
    # what its trace recorded (read apart, after the first draw): its input shapes
    recorded = data["notes"][track["args"][str(index)]]
    assert "Input Dims" in recorded
    WebDriverWait(browser, 20).until(
        lambda d: recorded in d.find_element(By.ID, "timeline-details").text)


def test_without_a_timeline_no_row_offers_one(browser: WebDriver,  # noqa: F811
                                              tmp_path: Path) -> None:
    """The same report rendered where its trace and NVML's samples are gone (the recorded
    trace compressed, the samples removed): no Timeline pane, and the cuDNN convolution row's
    links (its kernels) name none."""
    folder = tmp_path / "resnet"
    shutil.copytree(RESNET, folder)
    (folder / "nvml" / "nvml-timeline.jsonl").unlink()
    page = tmp_path / "report.html"
    done = perfstack_in(folder, "show", "report.json.gz", "--format", "html", "-o", str(page))
    assert done.code == 0, done.stderr
    assert 'id="pane-timeline"' not in page.read_text("utf-8")
    _open(browser, page)
    pane = _pane(browser, "ops")
    row = next(r for r in pane.find_elements(By.CSS_SELECTOR, "tr.clickable")
               if (r.get_attribute("data-key") or "").split(" [")[0] == "aten::cudnn_convolution")
    row.click()
    detail = row.find_element(By.XPATH, "following-sibling::tr[@class='detail']")
    html = detail.get_attribute("innerHTML")
    assert "kernels it ran" in html and "on the timeline" not in html, html
    assert 'class="to-timeline"' not in page.read_text("utf-8")  # nor the steps chart's


def test_each_run_s_steps_memory_and_compiles_are_on_its_axis() -> None:
    """The H200 compiled run's torch folder (workload.json's start, workload-steps.json's
    marks, compile.json's records): the steps laid from the first mark with the durations
    the folder holds, the resident memory after each, and each compile at its start, all in
    µs from the workload's start."""
    from perfstack_plugins.runtracks import RSS, run_events

    from perfstack.runfolder.rundir import RunFolder

    folder = ROOT / "tests" / "fixtures" / "gpu-runs" / "compiled" / "torch"
    events = run_events(folder, 7)
    run = RunFolder(folder)
    start_us = json.loads((folder / "workload.json").read_text())["start_ns"] / 1e3
    steps = [e for e in events if e.get("cat") == "perfstack step"
             and e["tid"] == events[0]["tid"]]
    marks = json.loads((folder / "workload-steps.json").read_text())
    assert [e["dur"] / 1e6 for e in steps] == pytest.approx(run.step_times())
    assert steps[0]["ts"] == pytest.approx(marks["first_mark_epoch_s"] * 1e6 - start_us)
    assert all(a["ts"] + a["dur"] == pytest.approx(b["ts"])
               for a, b in itertools.pairwise(steps))
    # the steps named by their number in the workload: without --steps the durations begin
    # with the second step (the first mark is the first step's end), as ProfilerStep#2 does
    assert run.first_timed_step() == 2
    assert [e["name"] for e in steps] == [f"step {n}" for n in range(2, marks["steps"] + 1)]
    # the resident memory after step n at step n's end (this folder holds one figure more
    # than its steps, the first batch's optimizer step's, which the run folder leaves out)
    rss = [e for e in events if e.get("name") == RSS]
    after = run.step_resident()
    assert len(after) == marks["steps"] == len(marks["step_rss_bytes"]) - 1
    ends = {1: steps[0]["ts"], **{int(e["name"].split()[1]): e["ts"] + e["dur"] for e in steps}}
    assert [e["args"]["value"] for e in rss] == [float(b) for b in after]
    assert [e["ts"] for e in rss] == pytest.approx([ends[n] for n in range(1, len(after) + 1)])
    compiles = [e for e in events if e.get("cat") == "torch.compile"]
    records = json.loads((folder / "compile.json").read_text())["records"]
    forward = [r for r in records if r.get("is_forward", True)]
    assert sorted(e["args"]["compile id"] for e in compiles) == sorted(
        r["compile_id"] for r in forward)
    first = next(e for e in compiles if e["args"]["compile id"] == "0/0")
    record = next(r for r in forward if r["compile_id"] == "0/0")
    assert first["ts"] == pytest.approx(record["start_time_us"] - start_us)


def test_nvml_samples_are_placed_at_their_sampler_s_start() -> None:
    """The H200 ResNet-50 run's NVML timeline counts from its sampler's start, which (a
    timeline of that perfstack) was the measured window's opening: its samples sit in that
    run's measured steps, not at its workload's start."""
    from perfstack_plugins.perfetto import nvml_events

    from perfstack.runfolder.rundir import RunFolder

    folder = RESNET / "nvml"
    events = nvml_events(folder / "nvml-timeline.jsonl", 3)
    run = RunFolder(folder)
    opened = run.window_opened()
    start = run.started()
    assert opened is not None and start is not None
    first = min(e["ts"] for e in events)
    assert first == pytest.approx((opened - start[1] / 1e9) * 1e6, abs=1e3)  # t ~ 0.0002 s


def test_the_runs_line_up_at_a_step(browser: WebDriver,  # noqa: F811
                                   resnet_page: Path) -> None:
    """Lined up at step 4, the NVML run's step 4 starts where the torch run's does (each run
    moved whole), and back on their own clocks when unticked."""
    data = _data(resnet_page)
    _open(browser, resnet_page)
    _pane(browser, "timeline")

    def step4() -> list[float]:
        found: list[float] = browser.execute_script(
            "return window.perfstackTimeline.stepStarts(4);")
        return found

    own = step4()
    assert len(own) == 2 and own[0] != pytest.approx(own[1])
    browser.find_element(By.ID, "timeline-step").clear()
    browser.find_element(By.ID, "timeline-step").send_keys("4")
    browser.find_element(By.ID, "timeline-lineup").click()
    lined = step4()
    assert lined[0] == pytest.approx(lined[1])
    assert max(lined) == pytest.approx(max(own))  # the later run stays, the earlier moves
    browser.find_element(By.ID, "timeline-lineup").click()
    assert step4() == pytest.approx(own)
    groups = {t["group"] for t in data["tracks"] if t["name"] == "steps"}
    assert len(groups) == 2  # the torch run's and the NVML run's


def test_the_cuda_allocator_s_curve_peaks_where_the_memory_pane_says(tmp_path: Path) -> None:
    """The H200 run's CUDA allocator snapshot (tests/fixtures/gpu-runs/recheck/memory): its
    allocated memory over time reaches the Memory pane's peak (cuda_peak_allocated) at one
    instant, marked with the pane's own site that held the most then (cuDNN's workspace while
    it benchmarks); torch's own peak marked with its categories where the curve holds their
    sum; and the file is read with every class refused."""
    import pickle

    from perfstack_plugins.torchprof.cudacurve import cuda_memory_events, load

    from perfstack.report.units import fmt_bytes

    folder = tmp_path / "memory"
    shutil.copytree(ROOT / "tests" / "fixtures" / "gpu-runs" / "recheck" / "memory", folder)
    snapshot = folder / "torch" / "cuda-memory.pickle.gz"
    events = cuda_memory_events(snapshot, 1500, 1 << 30)
    allocated = [e["args"]["value"] for e in events if e.get("name") == "GPU 0 allocated (B)"]
    report = load_report(folder / "report.json.gz")
    peak = report.metric("cuda_peak_allocated")
    assert peak is not None and max(allocated) == peak.value
    rows = [r for r in report.layers[Layer.MEMORY]
            if r.source == "torch" and "at_peak" in r.values]
    top = max(rows, key=lambda r: r.values["at_peak"].value or 0)
    marker = next(e for e in events if e.get("cat") == "perfstack mark")
    assert marker["name"] == (f"peak allocated {fmt_bytes(peak.value)}: {top.name} "
                              f"{fmt_bytes(top.values['at_peak'].value)}")
    # torch's own peak in its profiled steps, with what each category held then: placed on
    # the allocator's curve where it holds what the categories add up to (same clock)
    cycle = json.loads((folder / "torch" / "torch-memory.json").read_text())["cycles"][0]
    held = cycle["devices"]["cuda:0"]["categories"]
    ours = next(e for e in events if e.get("cat") == "perfstack mark"
                and e["name"].startswith("torch's peak"))
    assert ours["name"].startswith(f"torch's peak {fmt_bytes(sum(held.values()))}: activation "
                                   f"{fmt_bytes(held['activation'])}, ")
    assert "optimizer state" in ours["args"]["held"] and "gradient" in ours["args"]["held"]
    curve = sorted((e["ts"], e["args"]["value"]) for e in events
                   if e.get("name") == "GPU 0 allocated (B)")
    then = [v for ts, v in curve if ts <= ours["ts"]][-1]
    assert then == pytest.approx(sum(held.values()), rel=0.05)
    bad = tmp_path / "evil.pickle"
    bad.write_bytes(pickle.dumps(Path("/")))  # a class: refused, never built
    with pytest.raises(ValueError, match="not a CUDA memory snapshot"):
        load(bad, 1 << 20)


def test_a_selection_of_the_profiled_steps_gives_the_kernels_pane_s_busy_share(
        browser: WebDriver, resnet_page: Path) -> None:  # noqa: F811
    """Selected from the first profiled step's start to the last one's end (the main
    thread's ProfilerStep ranges), the stream's busy share is the report's gpu_busy (the
    Kernels pane's "busy" figure) within half a point: gpu_busy's windows end each step at the
    later of its host range and the end of the device work it launched, a few µs past the
    host's range the selection ends at (39.75% against 39.89% on this run)."""
    data = _data(resnet_page)
    main = next(t for t in data["tracks"] if t["name"] == "thread 774 (python3)")
    steps = [(a, a + d) for a, d, n, depth in zip(main["ts"], main["dur"], main["name_id"],
                                                   main["depth"], strict=True)
             if depth == 0 and data["names"][n].startswith("ProfilerStep")]
    _open(browser, resnet_page)
    _pane(browser, "timeline")
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script("return window.perfstackTimeline.draws") > 0)
    summary = browser.execute_script("return window.perfstackTimeline.select(arguments[0], "
                                     "arguments[1])", steps[0][0], steps[-1][1])
    row = next(r for r in summary if r["track"] == "stream 7 ")
    busy = load_report(RESNET / "report.json.gz").metric("gpu_busy")
    assert busy is not None and busy.value is not None
    assert 100 * row["busy"] == pytest.approx(busy.value, abs=0.5)


def test_a_step_of_the_steps_chart_leads_to_its_range_on_the_timeline(
        browser: WebDriver, resnet_page: Path) -> None:  # noqa: F811
    """The Overview's steps chart, its third bar clicked: the Timeline opens on the third
    profiled step (the main thread's third ProfilerStep range, read from the page's data
    here), zoomed to it, named in the details and selected; the range is the step's length
    the chart printed (the host's range on this host-bound run: 44.54 ms against 44.5); the
    page's script goes to a step asked for, and to none past the last profiled one."""
    data = _data(resnet_page)
    main = next(t for t in data["tracks"] if t["name"] == "thread 774 (python3)")
    steps = sorted((a, d, data["names"][n]) for a, d, n, depth in zip(
        main["ts"], main["dur"], main["name_id"], main["depth"], strict=True)
        if depth == 0 and data["names"][n].startswith("ProfilerStep#"))
    start, length, name = steps[2]
    _open(browser, resnet_page)
    bars = browser.find_elements(By.CSS_SELECTOR, "#steps-chart a.to-timeline")
    assert [b.get_attribute("data-step") for b in bars] == ["1", "2", "3", "4", "5"]
    printed = bars[2].find_elements(By.TAG_NAME, "text")[-1].text  # the step's length
    bars[2].find_element(By.CSS_SELECTOR, "rect").click()
    assert browser.find_element(By.ID, "pane-timeline").is_displayed()
    WebDriverWait(browser, 20).until(
        lambda d: d.execute_script("return window.perfstackTimeline.selection") is not None)
    view = browser.execute_script("return window.perfstackTimeline.view()")
    assert view["a"] <= start and start + length <= view["b"]
    assert view["b"] - view["a"] < 1.2 * length  # zoomed to the step, not the run
    assert name in browser.find_element(By.ID, "timeline-details").text
    assert f"selected {length / 1e3:.3g} ms" in browser.find_element(
        By.ID, "timeline-selection").text
    assert _seconds(printed) == pytest.approx(length * 1e-6, rel=0.01)
    # the outlier-less run's hint, and the same step asked for by the page's script
    assert "A click on a step shows it on the Timeline" in browser.find_element(
        By.ID, "steps").get_attribute("textContent")
    assert browser.execute_script(
        "return window.perfstackTimeline.goStep('torch run', 3)") == pytest.approx(start)
    assert browser.execute_script(
        "return window.perfstackTimeline.goStep('torch run', 6)") is None  # 5 were profiled
    assert "has 5 profiled step ranges (ProfilerStep#N) of this run, not 6" in \
        browser.find_element(By.ID, "timeline-details").text
    assert _console_errors(browser) == []


def test_the_detail_left_out_of_a_big_page_is_read_from_beside_it_as_a_zoom_needs_it(
        browser: WebDriver, resnet_page: Path, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The ResNet-50 page made with room for 5,000 slices (of 24,911): the shorter ones go
    into chunks beside the page; zoomed into one step, the page reads the chunks of the
    tracks in view and draws their slices; a selected step's stream busy share, with its
    detail read, is the one the page with every slice gives."""
    from perfstack_plugins.htmlreport import timeline as module

    from perfstack.plugin.load import load_plugins
    from perfstack.plugin.renderer import RenderOptions

    whole = _data(resnet_page)
    monkeypatch.setattr(module, "MAX_SLICES", 5_000)
    folder = resnet_page.parent
    page = tmp_path / "small.html"
    html = load_plugins().renderers()["html"].render(
        load_report(folder / "report.json.gz"),
        RenderOptions(report_dir=folder, output_dir=tmp_path))
    page.write_text(html, "utf-8")
    small = _data(page)
    assert sum(len(t["ts"]) for t in small["tracks"] if t["kind"] == "slices") < 6_000
    chunk_dir = tmp_path / small["chunk_dir"]
    assert sorted(p.name for p in chunk_dir.iterdir()) == sorted(
        c[2] for t in small["tracks"] for c in t.get("chunks") or [])
    main = next(t for t in whole["tracks"] if t["name"] == "thread 774 (python3)")
    step = next(i for i, n in enumerate(main["name_id"])
                if whole["names"][n] == "ProfilerStep#5")
    a, b = main["ts"][step], main["ts"][step] + main["dur"][step]
    _open(browser, page)
    _pane(browser, "timeline")
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script("return window.perfstackTimeline.draws") > 0)
    browser.execute_script("window.perfstackTimeline.setView(arguments[0], arguments[1])",
                           a, a + 200)
    WebDriverWait(browser, 30).until(
        lambda d: (d.execute_script("return window.perfstackTimeline.chunksLoaded") or 0) > 0)
    browser.execute_script("window.perfstackTimeline.select(arguments[0], arguments[1])", a, b)

    def stream_row() -> dict[str, Any]:
        rows = browser.execute_script("return window.perfstackTimeline.selection")
        return dict(next(r for r in rows if r["track"] == "stream 7 "))

    WebDriverWait(browser, 30).until(lambda d: not stream_row()["partial"])
    stream = next(t for t in whole["tracks"] if t["name"] == "stream 7 ")
    spans = [(s, s + d) for s, d, depth in zip(stream["ts"], stream["dur"], stream["depth"],
                                               strict=True) if depth == 0]
    assert stream_row()["busy"] == pytest.approx(_union(spans, a, b) / (b - a), abs=1e-6)


def test_a_kernel_s_details_name_the_op_that_launched_it(resnet_page: Path) -> None:
    """Each kernel of the stream names its launching op (the op of its External id in the
    trace), as the Kernels pane's 'launched by' does."""
    data = _data(resnet_page)
    stream = next(t for t in data["tracks"] if t["name"] == "stream 7 ")
    with gzip.open(RESNET / "torch" / "vm_774.0.pt.trace.json.gz", "rt") as fh:
        trace = json.load(fh)["traceEvents"]
    ops = {e["args"]["External id"]: e["name"] for e in trace if e.get("cat") == "cpu_op"
           and "External id" in e.get("args", {})}
    said = [data["notes"][n] for n in stream["args"].values()]
    launched = [s for s in said if s.startswith("launched by ")]
    assert len(launched) == len(said) > 0
    for note in launched[:200]:
        ext = int(note.split("External id: ")[1].split(";")[0])
        assert note.startswith(f"launched by {ops[ext]}; ")


def test_a_job_s_ranks_line_up_at_a_profiler_step(browser: WebDriver,  # noqa: F811
                                                 tmp_path: Path) -> None:
    """Two ranks recorded elsewhere (the A100 trace twice), rank 1's host 50 ms late: read by
    `perfstack analyze`, each rank is its own group; lined up at a step, both ranks'
    ProfilerStep of that number start together (ranks have no perfstack steps: torch's step
    ranges stand for them)."""
    from tests.conftest import two_rank_job

    def late(data: dict[str, Any]) -> None:
        for e in data["traceEvents"]:
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] += 50_000

    job = two_rank_job(tmp_path / "job", late)
    made = perfstack_in(tmp_path, "analyze", str(job), "-o", "job.json", "--html",
                        str(tmp_path / "job.html"))
    assert made.code == 0, made.stderr
    page = tmp_path / "job.html"
    data = _data(page)
    main = next(t for t in data["tracks"] if any(
        data["names"][n].startswith("ProfilerStep#") for n in t["name_id"]))
    k = next(data["names"][n] for n in main["name_id"]
             if data["names"][n].startswith("ProfilerStep#")).split("#")[1]
    _open(browser, page)
    _pane(browser, "timeline")
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script("return window.perfstackTimeline.draws") > 0)
    own = browser.execute_script("return window.perfstackTimeline.stepStarts(arguments[0])",
                                 int(k))
    assert len(own) == 2 and own[1] - own[0] == pytest.approx(50_000, abs=1)
    assert browser.find_element(By.ID, "timeline-lineup-box").is_displayed()
    browser.execute_script("window.perfstackTimeline.lineUp(arguments[0])", int(k))
    lined = browser.execute_script("return window.perfstackTimeline.stepStarts(arguments[0])",
                                   int(k))
    assert lined[0] == pytest.approx(lined[1])


def test_a_page_moved_without_its_detail_still_draws_and_says_so(
        browser: WebDriver, resnet_page: Path, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The small page of the test above with its detail folder deleted, and one chunk of
    another written as garbage: zoomed in, the page draws what it holds, raises no error,
    and a selection's figures say their detail could not be read."""
    from perfstack_plugins.htmlreport import timeline as module

    from perfstack.plugin.load import load_plugins
    from perfstack.plugin.renderer import RenderOptions

    monkeypatch.setattr(module, "MAX_SLICES", 5_000)
    folder = resnet_page.parent
    page = tmp_path / "small.html"
    page.write_text(load_plugins().renderers()["html"].render(
        load_report(folder / "report.json.gz"),
        RenderOptions(report_dir=folder, output_dir=tmp_path)), "utf-8")
    small = _data(page)
    chunks = sorted((tmp_path / small["chunk_dir"]).iterdir())
    chunks[0].write_text('window.perfstackTimelineChunk(0,0,"bm90IGd6aXA=");\n', "utf-8")
    for extra in chunks[1:]:
        extra.unlink()
    _open(browser, page)
    _pane(browser, "timeline")
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script("return window.perfstackTimeline.draws") > 0)
    mid = sum(small["home"]) / 2
    browser.execute_script("window.perfstackTimeline.setView(arguments[0], arguments[1])",
                           mid, mid + 200)
    browser.execute_script("window.perfstackTimeline.select(arguments[0], arguments[1])",
                           mid, mid + 200)

    def settled(d: WebDriver) -> bool:  # every chunk in the range read or given up on
        rows = d.execute_script("return window.perfstackTimeline.selection")
        return not any(r["partial"] for r in rows)

    WebDriverWait(browser, 30).until(settled)
    draws = browser.execute_script("window.perfstackTimeline.draw();"
                                   "return window.perfstackTimeline.draws")
    assert draws > 1
    body = browser.find_element(By.TAG_NAME, "body")
    assert body.get_attribute("data-errors") is None, body.get_attribute("data-errors")
    rows = browser.execute_script("return window.perfstackTimeline.selection")
    assert any(r["missing"] for r in rows)
    assert "could not be read" in browser.find_element(By.ID, "timeline-selection").text
