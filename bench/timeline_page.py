"""The Timeline pane at three sizes: the page's size, the time and memory to prepare it, and
in Chromium the first draw (from the page's navigation, its data parsed, to the canvas
drawn; and the draw alone) and a zoom step (the canvas's own draw time,
``perfstackTimeline.lastDrawMs``).

    .venv/bin/python bench/timeline_page.py [--ranks 8,80] [--zooms 10] [--opens 5]

Sizes: the H200 ResNet-50 run (tests/fixtures/gpu-runs/resnet: 5 steps, one GPU stream),
then a job of N ranks made of the shared A100 trace (../shared/gpu-traces/a100_negq, 25 MB
each uncompressed; each rank's clock shifted and its kernels shortened a little) read by
`perfstack analyze`. Needs Chromium and its
chromedriver (scripts/install-chromium.sh). Run alone on the machine; it prints one line a
size: slices kept and left out, page MB, seconds and peak memory to write the page, the
first draw after navigation (the first open, then the median of ``--opens`` more: a
browser's first open of a page pays its own start-up), where that time went (the page read,
its script run, its data read), and the median and slowest of ``--zooms`` zoom steps (w,
then s). 80 ranks are 2.0 GB of traces.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from timing import perfstack_command

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "gpu-traces" / "a100_negq" / "rank-0.json.gz"


def _resnet(work: Path) -> Path:
    folder = work / "resnet"
    shutil.copytree(ROOT / "tests" / "fixtures" / "gpu-runs" / "resnet", folder)
    for packed in folder.rglob("*.gz"):
        if packed.name != "report.json.gz":
            with gzip.open(packed, "rb") as src, open(packed.with_suffix(""), "wb") as out:
                shutil.copyfileobj(src, out)
    return folder / "report.json.gz"


def _job(work: Path, ranks: int) -> Path:
    folder = work / f"job{ranks}"
    with gzip.open(SHARED, "rt", encoding="utf-8") as fh:
        text = fh.read()
    for r in range(ranks):
        # each rank its own: its clock a little off and its kernels a little shorter (no
        # two ranks' pages alike, as a real job's are not; a copy would pack to nothing)
        trace = json.loads(text.replace('"rank": 0', f'"rank": {r}'))
        rng = random.Random(r)
        for e in trace["traceEvents"]:
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] = round(e["ts"] + 13.7 * r, 3)
            if e.get("cat") == "kernel" and isinstance(e.get("dur"), (int, float)):
                e["dur"] = round(e["dur"] * rng.uniform(0.9, 1.0), 3)
        (folder / f"r{r}").mkdir(parents=True)
        (folder / f"r{r}" / f"rank-{r}.pt.trace.json").write_text(json.dumps(trace), "utf-8")
    subprocess.run([perfstack_command(), "analyze", str(folder), "-o",
                    str(folder / "job.json")], check=True, capture_output=True)
    return folder / "job.json"


def _page(report: Path) -> tuple[Path, float, float]:
    """The page written, the seconds it took and the writer's peak resident memory (GB)."""
    page = report.parent / "page.html"
    began = time.perf_counter()
    child = subprocess.Popen([perfstack_command(), "show", str(report), "--format", "html",
                              "-o", str(page)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, cwd=report.parent)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"perfstack show {report} ended {child.returncode}")
    return page, time.perf_counter() - began, usage.ru_maxrss / 1e6


def _driver() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def _open(driver: webdriver.Chrome, page: Path) -> list[float]:
    """One open of the page on its Timeline pane: ms from navigation to the page read, the
    timeline's script run, its data read and its first draw."""
    driver.get("about:blank")
    driver.get(page.resolve().as_uri() + "#pane-timeline")
    WebDriverWait(driver, 120).until(lambda d: d.execute_script(
        "return window.perfstackTimeline && window.perfstackTimeline.draws > 0"))
    got: list[float] = driver.execute_script(
        "var n = performance.getEntriesByType('navigation')[0],"
        " t = window.perfstackTimeline, m = t.timing;"
        " return [n.responseEnd, m.script, m.read, t.sinceNavigationMs];")
    return got


def _measure(driver: webdriver.Chrome, page: Path, zooms: int,
             opens: int) -> tuple[float, list[list[float]], list[float], str]:
    driver.set_window_size(1400, 1000)
    times = [_open(driver, page) for _ in range(1 + opens)]
    first = float(driver.execute_script("return window.perfstackTimeline.lastDrawMs"))
    canvas = driver.find_element(By.ID, "timeline-canvas")
    steps = []
    for i in range(zooms):
        canvas.send_keys("w" if i < zooms // 2 else "s")
        steps.append(float(driver.execute_script("return window.perfstackTimeline.lastDrawMs")))
    said = driver.find_element(By.ID, "timeline-said").text.split(".")[0]
    return first, times, steps, said


def main() -> None:
    """Print one line a size."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="8,80")
    p.add_argument("--zooms", type=int, default=10)
    p.add_argument("--opens", type=int, default=5)
    args = p.parse_args()
    driver = _driver()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            for ranks in [0] + [int(n) for n in args.ranks.split(",") if n]:
                label = f"{ranks} ranks of a100_negq" if ranks else "resnet (1 rank)"
                report = _job(work, ranks) if ranks else _resnet(work)
                page, seconds, rss = _page(report)
                first, times, steps, said = _measure(driver, page, args.zooms, args.opens)
                beside = sum(f.stat().st_size for d in page.parent.glob("timeline-*")
                             for f in d.iterdir())
                traces = sum(f.stat().st_size for f in report.parent.rglob("*.json")
                             if f.name.endswith(".pt.trace.json"))
                later = [statistics.median(col) for col in zip(*times[1:], strict=True)]
                print(f"{label} ({traces / 1e9:.2f} GB of traces): {said}; page "
                      f"{page.stat().st_size / 1e6:.1f} MB and {beside / 1e6:.1f} MB beside it, "
                      f"written in {seconds:.1f} s at {rss:.1f} GB peak; first draw "
                      f"{times[0][3]:.0f} ms after navigation on the first open, median "
                      f"{later[3]:.0f} ms on {args.opens} more (page read {later[0]:.0f}, "
                      f"script {later[1]:.0f}, data read {later[2]:.0f}; the draw itself "
                      f"{first:.0f} ms), zoom step median {statistics.median(steps):.0f} ms, "
                      f"slowest {max(steps):.0f} ms")
                shutil.rmtree(report.parent)  # 2 GB a size: one at a time on the disk
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
