"""The Timeline pane at three sizes: the page's size, the time to prepare it, and in Chromium
the first draw (from the page's navigation, its data parsed, to the canvas drawn; and the
draw alone) and a zoom step (the canvas's own draw time, ``perfstackTimeline.lastDrawMs``).

    .venv/bin/python bench/timeline_page.py [--ranks 8,32] [--zooms 10]

Sizes: the H200 ResNet-50 run (tests/fixtures/gpu-runs/resnet: 5 steps, one GPU stream),
then a job of N ranks made of copies of the shared A100 trace (../shared/gpu-traces/
a100_negq, 25 MB each uncompressed) read by `perfstack analyze`. Needs Chromium and its
chromedriver (scripts/install-chromium.sh). Run alone on the machine; it prints one line a
size: slices kept and left out, page MB, seconds to write the page, first draw ms, and the
median and slowest of ``--zooms`` zoom steps (w, then s).
"""

from __future__ import annotations

import argparse
import gzip
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
        (folder / f"r{r}").mkdir(parents=True)
        (folder / f"r{r}" / f"rank-{r}.pt.trace.json").write_text(
            text.replace('"rank": 0', f'"rank": {r}'), "utf-8")
    subprocess.run([perfstack_command(), "analyze", str(folder), "-o",
                    str(folder / "job.json")], check=True, capture_output=True)
    return folder / "job.json"


def _page(report: Path) -> tuple[Path, float]:
    page = report.parent / "page.html"
    began = time.perf_counter()
    subprocess.run([perfstack_command(), "show", str(report), "--format", "html", "-o",
                    str(page)], check=True, capture_output=True, cwd=report.parent)
    return page, time.perf_counter() - began


def _driver() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def _measure(driver: webdriver.Chrome, page: Path,
             zooms: int) -> tuple[float, float, list[float], str]:
    driver.set_window_size(1400, 1000)
    driver.get(page.resolve().as_uri() + "#pane-timeline")
    WebDriverWait(driver, 120).until(lambda d: d.execute_script(
        "return window.perfstackTimeline && window.perfstackTimeline.draws > 0"))
    first = float(driver.execute_script("return window.perfstackTimeline.lastDrawMs"))
    loaded = float(driver.execute_script("return window.perfstackTimeline.sinceNavigationMs"))
    canvas = driver.find_element(By.ID, "timeline-canvas")
    steps = []
    for i in range(zooms):
        canvas.send_keys("w" if i < zooms // 2 else "s")
        steps.append(float(driver.execute_script("return window.perfstackTimeline.lastDrawMs")))
    said = driver.find_element(By.ID, "timeline-said").text.split(".")[0]
    return first, loaded, steps, said


def main() -> None:
    """Print one line a size."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="8,32")
    p.add_argument("--zooms", type=int, default=10)
    args = p.parse_args()
    driver = _driver()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            sizes = [("resnet (1 rank)", _resnet(work))]
            sizes += [(f"{n} ranks of a100_negq", _job(work, int(n)))
                      for n in args.ranks.split(",") if n]
            for label, report in sizes:
                page, seconds = _page(report)
                first, loaded, steps, said = _measure(driver, page, args.zooms)
                beside = sum(f.stat().st_size for d in page.parent.glob("timeline-*")
                             for f in d.iterdir())
                print(f"{label}: {said}; page {page.stat().st_size / 1e6:.1f} MB and "
                      f"{beside / 1e6:.1f} MB beside it, written in "
                      f"{seconds:.1f} s; drawn {loaded:.0f} ms after the page was asked for (the "
                      f"draw itself {first:.0f} ms), zoom step median "
                      f"{statistics.median(steps):.0f} ms, slowest {max(steps):.0f} ms")
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
