"""How a job of many ranks opens in a browser: the HTML report's Ranks pane at 1,024 ranks.

    .venv/bin/python bench/html_ranks.py [--ranks 1024] [--steps 200] [--rounds 3]

Makes a report of N ranks with S steps each (step times around 100 ms with a fixed seed's
noise, one rank twice as slow), writes its HTML page two ways, the heat map's cells as SVG
elements of their own (what every map was before) and as the pixels of one image (what a
map of more than ``rankheat.MOST_CELLS`` cells is now), and opens each in headless Chromium
under chromedriver, alternately in each round: the time until the page's script says it is
ready, then the time to open the Ranks pane (a click on its tab until the browser has
laid it out and painted: the next animation frame), then a hover on the slow rank's row.
Prints the medians, their ratio, and each page's size. Run it alone: the machine's other work
shows.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from timing import spread

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

ROOT = Path(__file__).resolve().parent.parent


def _report(folder: Path, ranks: int, steps: int, slow: int) -> Path:
    from perfstack.report import Better, Metric, Report, RunInfo
    from perfstack.report.files import save_report

    rng = random.Random(7)
    report = Report(run=RunInfo(command=["train.py"], cwd=str(folder), started="",
                                duration_s=60.0, perfstack_version="0", repeat=1, warmup=0,
                                timeout_s=None, complete=True), environment={})
    for rank in range(ranks):
        base = 0.2 if rank == slow else 0.1
        times = [base * rng.lognormvariate(0, 0.08) for _ in range(steps)]
        report.metrics.append(Metric(f"torch_step_time[rank{rank}]", statistics.median(times),
                                     "s", "framework", "torch", Better.LOWER, samples=times,
                                     samples_of="steps"))
    path = folder / "job.json"
    save_report(report, path)
    return path


def _page(report: Path, out: Path, most_cells: int | None) -> int:
    """Write the page (the map as elements up to ``most_cells`` cells); its size in bytes."""
    from perfstack_plugins.htmlreport import rankheat

    from perfstack.cli.main import main

    default = rankheat.MOST_CELLS
    rankheat.MOST_CELLS = most_cells if most_cells is not None else default
    try:
        code = main(["show", str(report), "--format", "html", "-o", str(out)])
    finally:
        rankheat.MOST_CELLS = default
    if code != 0:
        raise SystemExit(f"perfstack show: exit {code}")
    return out.stat().st_size


def _driver() -> WebDriver:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser = subprocess.run([str(ROOT / "scripts" / "install-chromium.sh")], check=True,
                             capture_output=True, text=True).stdout.strip().splitlines()[-1]
    driver_path = next(p for p in ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
                       if Path(p).exists())
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-extensions", "--no-first-run"):
        options.add_argument(flag)
    driver: WebDriver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(300)
    driver.set_script_timeout(300)
    driver.set_window_size(1400, 1000)
    return driver


#: Clicks the Ranks tab and answers once the browser has painted the pane.
_OPEN_PANE = """
const done = arguments[arguments.length - 1];
const t = performance.now();
document.querySelector('nav.tabs a[href="#pane-ranks"]').click();
document.body.getBoundingClientRect();
requestAnimationFrame(() => setTimeout(() => done(performance.now() - t), 0));
"""


def _open(driver: WebDriver, page: Path, slow: int) -> tuple[float, float, float]:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    start = time.perf_counter()
    driver.get(page.resolve().as_uri())
    WebDriverWait(driver, 300, poll_frequency=0.02).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    ready = time.perf_counter() - start
    pane = float(driver.execute_async_script(_OPEN_PANE)) / 1000
    rows = driver.find_elements(By.CSS_SELECTOR, "#rank-heat rect.heat-row")
    target = rows[slow] if rows else driver.find_element(
        By.XPATH, f'//*[local-name()="rect"][*[local-name()="title" and '
        f'starts-with(., "rank {slow}, step 1:")]]')
    start = time.perf_counter()
    ActionChains(driver).move_to_element(target).perform()
    hover = time.perf_counter() - start
    return ready, pane, hover


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args()
    slow = ns.ranks * 2 // 3
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        report = _report(folder, ns.ranks, ns.steps, slow)
        pages = {"cells as SVG elements": folder / "elements.html",
                 "cells as one image": folder / "image.html"}
        sizes = {name: _page(report, path, 10**9 if "elements" in name else None)
                 for name, path in pages.items()}
        driver = _driver()
        got: dict[str, list[tuple[float, float, float]]] = {name: [] for name in pages}
        try:
            for n in range(ns.rounds):
                for name in list(pages) if n % 2 == 0 else list(reversed(pages)):  # alternated
                    got[name].append(_open(driver, pages[name], slow))
        finally:
            driver.quit()
    print(f"{ns.ranks} ranks x {ns.steps} steps, {ns.rounds} rounds, medians "
          "(ready: the page's script done; pane: the Ranks tab clicked until painted; "
          "hover: a rank's row)")
    for name in pages:
        ready, pane, hover = (statistics.median(x[i] for x in got[name]) for i in range(3))
        print(f"  {name:24} page {sizes[name] / 2**20:6.1f} MiB  ready {ready:6.2f} s  "
              f"pane {pane:6.2f} s  hover {hover:5.2f} s")
    elements, image = ([x[1] + x[0] for x in got[name]] for name in pages)
    faster = [e / i for e, i in zip(elements, image, strict=True)]
    print("  ready + pane: the image's page, as fast as the elements' within each round "
          f"(min / median / max): {spread(faster, '.1f')}")


if __name__ == "__main__":
    main()
