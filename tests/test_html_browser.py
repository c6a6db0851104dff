"""The interactive HTML report in a real browser: Debian's Chromium, driven through its
chromedriver with Selenium, on real reports (tiny_mlp profiled by six backends, ResNet-50, a
report of 20,000 op rows, a diff). Each test does what a person does: sorts a table and reads
the order, searches the flame graph, zooms and resets, opens a tree node, follows a function
to its ops; the page must log no error, and at 1400 and 800 px nothing may be drawn past the
window. Screenshots are saved (``PERFSTACK_SCREENSHOTS=DIR`` keeps them; docs/html.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from perfstack.analysis.view import build
from perfstack.report import Layer, Quantity, Report, Row
from perfstack.report.files import load_report, save_report
from tests.conftest import ROOT, perfstack_in, slow_host, two_rank_job

UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}


def _chromedriver() -> str:
    for path in ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"):
        if os.path.exists(path):
            return path
    raise AssertionError("no chromedriver: scripts/install-chromium.sh installs Debian's")


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[WebDriver]:
    """Headless Chromium under chromedriver, offline, logging the page's console."""
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-extensions", "--no-first-run"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(_chromedriver()), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


def _page_of(report: Report, path: Path, page: Path | None = None) -> Path:
    """Save ``report`` at ``path`` and return the HTML page ``perfstack show`` makes of it."""
    save_report(report, path)
    page = page or path.with_suffix(".html")
    proc = perfstack_in(path.parent, "show", str(path), "--format", "html", "-o", str(page))
    assert proc.code == 0, proc.stderr
    return page


def _open(driver: WebDriver, page: Path, width: int = 1400) -> None:
    driver.set_window_size(width, 1000)
    driver.get(page.resolve().as_uri())
    WebDriverWait(driver, 60).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    body = driver.find_element(By.TAG_NAME, "body")
    assert body.get_attribute("data-errors") is None, body.get_attribute("data-errors")


def _console_errors(driver: WebDriver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _pane(driver: WebDriver, name: str) -> WebElement:
    driver.find_element(By.CSS_SELECTOR, f'nav.tabs a[href="#pane-{name}"]').click()
    pane = driver.find_element(By.ID, f"pane-{name}")
    assert pane.is_displayed()
    return pane


def _seconds(text: str) -> float:
    number, unit = text.split()
    return float(number.replace(",", "")) * UNITS[unit]


def _column(table: WebElement, title: str) -> tuple[int, list[str]]:
    heads = [th.text.rstrip(" ▲▼") for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    i = heads.index(title)
    # One script for the whole column (its rendered text, as .text gives it): a round trip to
    # the driver per row cost more than a second per table.
    cells: list[str] = table.parent.execute_script(
        "return Array.from(arguments[0].querySelectorAll('tbody tr:not(.detail)'),"
        " tr => tr.querySelectorAll('td')[arguments[1]].innerText.trim())", table, i)
    return i, cells


def _sort(pane: WebElement, table_id: str, title: str, descending: bool) -> WebElement:
    """Click a column's header until the table is sorted by it the wanted way; the table."""
    for _ in range(3):
        table = pane.find_element(By.CSS_SELECTOR, f'table[data-table="{table_id}"]')
        head = table.find_element(By.XPATH, f'.//th[button[text()="{title}"]]')
        if head.get_attribute("aria-sort") == ("descending" if descending else "ascending"):
            return table
        head.find_element(By.TAG_NAME, "button").click()
    raise AssertionError(f"{table_id} would not sort by {title}")


def _no_overflow(driver: WebDriver, shots: Path, name: str) -> None:
    """Nothing past the window's right edge, on every pane; a screenshot of each, inspected."""
    for tab in driver.find_elements(By.CSS_SELECTOR, "nav.tabs a"):
        tab.click()
        pane = tab.get_attribute("href").split("#")[1]
        wide = driver.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth")
        assert wide <= 0, f"{pane} is {wide}px wider than the window"
        shot = shots / f"{name}-{pane}.png"
        driver.save_screenshot(str(shot))
        image = Image.open(shot).convert("RGB")
        colours = image.getcolors(maxcolors=1 << 20) or []
        assert len(colours) > 10, f"{shot}: a blank page"


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    keep = os.environ.get("PERFSTACK_SCREENSHOTS")
    folder = Path(keep) if keep else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_tiny_mlp_sorts_searches_zooms_and_links(browser: WebDriver, tiny_report: Path,
                                                 shots: Path) -> None:
    page = tiny_report.with_suffix(".html")
    _open(browser, page)
    # Ops: sort by self time, both ways, and read the order off the page.
    ops = _pane(browser, "ops")
    table = _sort(ops, "framework-torch", "own", descending=True)
    values = [_seconds(c) for c in _column(table, "own")[1] if c]
    assert len(values) > 5 and values == sorted(values, reverse=True), values[:10]
    table = _sort(ops, "framework-torch", "own", descending=False)
    values = [_seconds(c) for c in _column(table, "own")[1] if c]
    assert values == sorted(values), values[:10]
    # Group by op name: fewer rows, each summing its shapes.
    group = ops.find_element(By.CSS_SELECTOR, '[data-role="group"]')
    group.click()
    grouped = ops.find_element(By.CSS_SELECTOR, 'table[data-table="framework-torch"]')
    names = [td.text for td in grouped.find_elements(By.CSS_SELECTOR, "td.name")]
    assert any(n.startswith("aten::mm (") and n.endswith("shapes)") for n in names), names
    group.click()  # back to one row per shape
    # Python: search the flame graph, zoom into a match, reset.
    python = _pane(browser, "python")
    search = python.find_element(By.CSS_SELECTOR, '[data-role="flame-search"]')
    search.send_keys("one_batch")
    matches = python.find_elements(By.CSS_SELECTOR, "#flamegraph div.match")
    assert matches, "no flame graph frame matches one_batch"
    status = python.find_element(By.CSS_SELECTOR, '[data-role="flame-status"]').text
    share = float(re.search(r"matches: ([\d.]+)%", status)[1])  # type: ignore[index]
    assert 0 < share <= 100, status
    matches[0].click()
    flame = python.find_element(By.ID, "flamegraph")
    assert flame.get_attribute("data-zoomed") == "1"
    python.find_element(By.CSS_SELECTOR, '[data-role="flame-reset"]').click()
    assert python.find_element(By.ID, "flamegraph").get_attribute("data-zoomed") == "0"
    # The call tree opens a node.
    toggle = python.find_element(By.CSS_SELECTOR, '#call-tree [data-role="tree-toggle"]')
    toggle.click()
    assert python.find_elements(By.CSS_SELECTOR, "#call-tree ul.tree li")
    # Overview: a function of the drill-down leads to its ops.
    overview = _pane(browser, "overview")
    link = overview.find_element(By.CSS_SELECTOR, "a.ops-link")
    function = link.get_attribute("data-filter")
    link.click()
    ops = browser.find_element(By.ID, "pane-ops")
    assert ops.is_displayed()
    box = ops.find_element(By.CSS_SELECTOR, '[data-role="search"]')
    assert box.get_attribute("value") == function
    rows = ops.find_elements(By.CSS_SELECTOR, 'table[data-table="framework-torch"] tbody tr')
    assert rows and all(function in r.text for r in rows), function
    # An op's row opens its callers and kernels; a kernel link leads to the Kernels pane.
    rows[0].click()
    detail = ops.find_element(By.CSS_SELECTOR, "tr.detail")
    assert "called from" in detail.text
    kernel_links = detail.find_elements(By.XPATH, './/b[text()="kernels it ran: "]/../a')
    if kernel_links:
        kernel_links[0].click()
        assert browser.find_element(By.ID, "pane-kernels").is_displayed()
    # Overview: the Metrics table, filled by the script, a row a metric as the JSON has it.
    view = build(load_report(tiny_report), full=True)
    overview = _pane(browser, "overview")
    overview.find_element(By.CSS_SELECTOR, "#metrics summary").click()
    metrics = overview.find_element(By.CSS_SELECTOR, 'table[data-table="metrics"]')
    shown = [r.find_elements(By.TAG_NAME, "td")[0].text
             for r in metrics.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert shown == [m.name for m in view.metrics][:100], shown[:5]
    search = overview.find_element(By.CSS_SELECTOR, '#metrics [data-role="search"]')
    search.send_keys("wall_time")
    rows = overview.find_element(By.CSS_SELECTOR, 'table[data-table="metrics"]')
    assert all("wall_time" in r.text for r in rows.find_elements(By.CSS_SELECTOR, "tbody tr"))
    assert _console_errors(browser) == []
    for width in (1400, 800):
        browser.set_window_size(width, 1000)
        _no_overflow(browser, shots, f"tiny-{width}")


def test_twenty_thousand_rows_open_and_sort(browser: WebDriver, tiny_report: Path,
                                            tmp_path: Path, shots: Path) -> None:
    """A report with 20,000 op rows: the page shows a page of them, sorts and searches all."""
    report = load_report(tiny_report)
    template = report.layers[Layer.FRAMEWORK][0]
    report.layers[Layer.FRAMEWORK] = [
        Row(f"aten::op{i} [[{i}]]", f"aten::op{i % 500} [[{i}]]", template.source,
            {"calls": Quantity(i % 7 + 1, "count"), "self": Quantity(1e-6 * (i % 997), "s")},
            {"op": f"aten::op{i % 500}"}) for i in range(20_000)]
    html_path = _page_of(report, tmp_path / "big.json")
    _open(browser, html_path)
    ops = _pane(browser, "ops")
    count = ops.find_element(By.CSS_SELECTOR, ".count").text
    assert count == "100 of 20000 rows", count
    table = _sort(ops, "framework-torch", "own", descending=True)
    values = [_seconds(c) for c in _column(table, "own")[1]]
    assert values[0] == pytest.approx(996e-6) and values == sorted(values, reverse=True)
    ops.find_element(By.CSS_SELECTOR, '[data-role="search"]').send_keys("aten::op499 ")
    assert "matching" in ops.find_element(By.CSS_SELECTOR, ".count").text
    assert _console_errors(browser) == []
    _no_overflow(browser, shots, "big-1400")


def test_resnet50_and_a_diff(browser: WebDriver, tmp_path: Path, shots: Path) -> None:
    """ResNet-50's recorded report (tests/fixtures/reports/resnet50.json.gz: a real torch run,
    its convolutions), then a recorded ab session (tests/fixtures/reports/ab_work, 30% more
    matmuls) compared: the diff page's rows sort by how much they moved."""
    proc = perfstack_in(tmp_path, "show", str(ROOT / "tests/fixtures/reports/resnet50.json.gz"),
                        "--format", "html", "-o", "a.html")
    assert proc.code == 0, proc.stderr[-3000:]
    recorded = ROOT / "tests/fixtures/reports/ab_work"
    paths = [recorded / "base.json.gz", recorded / "new.json.gz"]
    _open(browser, tmp_path / "a.html")
    ops = _pane(browser, "ops")
    names = [td.text for td in ops.find_elements(By.CSS_SELECTOR, "td.name")]
    assert any(n.startswith("aten::convolution") or "conv" in n for n in names), names[:10]
    assert _console_errors(browser) == []
    _no_overflow(browser, shots, "resnet50-800")
    out = tmp_path / "diff.html"
    proc = perfstack_in(tmp_path, "diff", str(paths[0]), str(paths[1]), "--format", "html",
                        "-o", str(out))
    assert proc.code == 0, proc.stderr
    _open(browser, out)
    overview = browser.find_element(By.ID, "pane-overview")
    assert "regression" in overview.text and "wall time" in overview.text
    ops = _pane(browser, "ops")
    table_id = ops.find_element(By.CSS_SELECTOR, "table").get_attribute("data-table")
    table = _sort(ops, table_id, "|moved|", descending=True)
    moved = [_seconds(c) for c in _column(table, "|moved|")[1] if c]
    assert moved and moved == sorted(moved, reverse=True)
    assert _console_errors(browser) == []
    for width in (1400, 800):
        browser.set_window_size(width, 1000)
        _no_overflow(browser, shots, f"diff-{width}")




def test_gpu_traces_of_two_ranks(browser: WebDriver, tmp_path: Path, shots: Path) -> None:
    """`perfstack analyze` on real A100 traces of two ranks: the device breakdown in the
    overview and the kernels pane agrees with the JSON, kernels sort by device time, the
    ranks pane names the slowest rank, nothing overflows at 1400 or 800 px."""
    import json

    def slower(data: dict[str, Any]) -> None:  # rank 1's host 25% slower
        slow_host(data, 1.25)

    job = two_rank_job(tmp_path / "job", slower)
    out = tmp_path / "job.json"
    proc = perfstack_in(tmp_path, "analyze", str(job), "-o", str(out), "-q", "--html")
    assert proc.code == 0, proc.stderr
    metrics = {m["name"]: m["value"] for m in json.loads(out.read_text())["metrics"]}
    _open(browser, out.with_suffix(".html"))
    device = browser.find_element(By.ID, "device")
    assert f"busy {round(metrics['gpu_busy'])}%" in device.text
    assert "waiting for the host to launch" in device.text
    kernels = _pane(browser, "kernels")
    assert f"busy {round(metrics['gpu_busy'])}%" in kernels.find_element(By.ID, "device-k").text
    table = _sort(kernels, "kernel-torch", "device time", descending=True)
    values = [_seconds(c) for c in _column(table, "device time")[1]]
    assert values == sorted(values, reverse=True) and values[0] > 0.04
    ranks = _pane(browser, "ranks")
    assert "rank 1 is the slowest, 25% slower" in ranks.text and "collective_wait" in ranks.text
    assert "rank 1 is 25% slower per step than rank 0" in ranks.text
    assert _console_errors(browser) == []
    _no_overflow(browser, shots, "gpu-1400")
    browser.set_window_size(800, 1000)
    _no_overflow(browser, shots, "gpu-800")


def test_a_hostile_artifact_path_is_never_a_link_that_runs(browser: WebDriver,
                                                           tmp_path: Path) -> None:
    """A report is a file people pass around: one whose raw-output paths are
    ``javascript:...`` or ``data:text/html,<script>...`` (a valid report, crafted), shown as
    HTML and clicked everywhere a reader can click, runs nothing; the paths are shown as
    text. An ordinary relative path stays a link, with its odd characters escaped."""
    report = load_report(ROOT / "tests/fixtures/reports/ab_work/base.json.gz")
    hostile = ["javascript:window.__pwned=1", "JaVaScRiPt:window.__pwned=2",
               "data:text/html,<script>window.opener.__pwned=3</script>"]
    report.backends[0].artifacts = {"trace": hostile[0], "log": hostile[1], "page": hostile[2],
                                    "odd": "torch/a b#c?.json"}
    page = _page_of(report, tmp_path / "crafted.json", tmp_path / "page.html")
    text = page.read_text()
    assert not re.search(r'href="\s*(javascript|data):', text, re.IGNORECASE)
    assert 'href="./torch/a%20b%23c%3F.json"' in text
    _open(browser, page)
    section = browser.find_element(By.ID, "artifacts")
    shown = section.text
    for path in hostile:
        assert path in shown  # as text
    links = [a.text for a in section.find_elements(By.TAG_NAME, "a")]
    assert "torch/a b#c?.json" in links and not set(hostile) & set(links), links
    for path in hostile:  # a reader clicks the path: it is text, nothing runs
        target = next(c for c in browser.find_element(By.ID, "artifacts").find_elements(
            By.TAG_NAME, "code") if c.text == path)
        target.click()
        assert len(browser.window_handles) == 1
        assert browser.current_url.split("#")[0].endswith("/page.html"), browser.current_url
        assert browser.execute_script("return window.__pwned === undefined")


def test_a_trace_named_like_a_script_is_shown_as_text(tmp_path: Path) -> None:
    """``perfstack analyze`` of a trace file whose name is a ``javascript:`` URL (no crafted
    report needed): the page names it as text, never as a link."""
    import shutil

    name = "javascript:window.__pwned=1;x.pt.trace.json.gz"
    shutil.copy(ROOT / "tests/fixtures/gpu-traces/mi250_rocm/rank-0.json.gz", tmp_path / name)
    proc = perfstack_in(tmp_path, "analyze", name, "-q", "-o", "r.json", "--html", "r.html")
    assert proc.code == 0, proc.stderr
    page = (tmp_path / "r.html").read_text()
    assert "window.__pwned=1;x.pt.trace.json.gz" in page
    assert not re.search(r'href="\s*javascript:', page, re.IGNORECASE)
