"""The Timeline pane at four sizes: the page's size, the time and memory to prepare it, and
in Chromium the first draw (from the page's navigation, its data parsed, to the canvas
drawn; and the draw alone) and a zoom step (the canvas's own draw time,
``perfstackTimeline.lastDrawMs``).

    .venv/bin/python bench/timeline_page.py [--single 500] [--ranks 8,80] [--zooms 10]
                                            [--opens 5]

Sizes: one step (the shared A100 trace, ../shared/gpu-traces/a100_negq, cut to its first
profiled step); the H200 ResNet-50 run (tests/fixtures/gpu-runs/resnet: 5 steps, one GPU
stream); one rank's trace of ``--single`` MB (the A100 trace's 5 steps repeated one after
the other, each copy's ids and step numbers its own: 500 MB is 20 copies, 100 steps); then
a job of N ranks made of the same trace (25 MB each uncompressed; each rank's clock shifted
and its kernels shortened a little). Each read by `perfstack analyze`. Needs Chromium and
its chromedriver (scripts/install-chromium.sh). Run alone on the machine; it prints one line
a size: slices kept and left out, page MB, seconds and peak memory to write the page, the
first draw after navigation (the first open, then the median of ``--opens`` more: a
browser's first open of a page pays its own start-up), where that time went (the page read,
its script run, its data read), and the median and slowest of ``--zooms`` zoom steps (w,
then s). 80 ranks are 2.0 GB of traces.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
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


#: How far apart each copy's correlation and event ids are (the trace's own reach 937,419).
ID_STRIDE = 1_000_000
IDS = ("correlation", "External id", "Ev Idx")


def _one_step(work: Path) -> Path:
    """The A100 trace cut to its first profiled step: every event that began before the
    second ProfilerStep range began (the first step's host work and the device work it ran by
    then), the other step ranges left out."""
    folder = work / "one-step"
    folder.mkdir(parents=True)
    with gzip.open(SHARED, "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    timed = [e for e in trace["traceEvents"] if isinstance(e.get("ts"), (int, float))
             and e.get("ph") != "M"]
    steps = sorted((e for e in timed if str(e.get("name", "")).startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    first, second = steps[0], steps[1]
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("ph") == "M"] + [
        e for e in timed if e["ts"] < second["ts"] and (e not in steps or e is first)]
    path = folder / "rank-0.pt.trace.json"
    path.write_text(json.dumps(trace), "utf-8")
    subprocess.run([perfstack_command(), "analyze", str(path), "-o",
                    str(folder / "one-step.json")], check=True, capture_output=True)
    return folder / "one-step.json"


def _single(work: Path, megabytes: int) -> Path:
    """One rank's trace of about ``megabytes`` MB: the A100 trace's steps repeated after one
    another (its metadata once; each copy's clock moved past the last, its ids and its
    ProfilerStep numbers its own, so that flows, launches and steps still pair up)."""
    folder = work / f"single{megabytes}"
    folder.mkdir(parents=True)
    with gzip.open(SHARED, "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    events = trace["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M"]
    span = max(e["ts"] + (e.get("dur") or 0) for e in timed) - min(e["ts"] for e in timed)
    steps = sum(1 for e in timed if str(e.get("name", "")).startswith("ProfilerStep#"))
    copies = max(1, round(megabytes * 1e6 / len(json.dumps(timed))))  # 25 MB a copy
    out = [e for e in events if e.get("ph") == "M"]
    for k in range(copies):
        for e in timed:
            c = dict(e, ts=round(e["ts"] + k * span * 1.001, 3))
            if "id" in c and isinstance(c["id"], int):
                c["id"] += k * ID_STRIDE
            args = c.get("args")
            if isinstance(args, dict) and any(i in args for i in IDS):
                c["args"] = {**args, **{i: args[i] + k * ID_STRIDE for i in IDS
                                        if isinstance(args.get(i), int)}}
            name = str(c.get("name", ""))
            if name.startswith("ProfilerStep#"):
                c["name"] = f"ProfilerStep#{int(name[13:]) + k * steps}"
            out.append(c)
    trace["traceEvents"] = out
    path = folder / "rank-0.pt.trace.json"
    path.write_text(json.dumps(trace), "utf-8")
    subprocess.run([perfstack_command(), "analyze", str(path), "-o",
                    str(folder / "single.json")], check=True, capture_output=True)
    return folder / "single.json"


def _page(report: Path) -> tuple[Path, float, float]:
    """The page written, the seconds it took and the writer's peak resident memory (GB), as
    GNU time reports it (a child forked from this process would count this process's own
    memory, which the biggest sizes make gigabytes, in its peak)."""
    page = report.parent / "page.html"
    began = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", perfstack_command(), "show",
                           str(report), "--format", "html", "-o", str(page)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          cwd=report.parent, check=False)
    if done.returncode:
        raise SystemExit(f"perfstack show {report} ended {done.returncode}: {done.stderr}")
    peak_kb = int(done.stderr.strip().splitlines()[-1])
    return page, time.perf_counter() - began, peak_kb * 1024 / 1e9


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
    p.add_argument("--single", type=int, default=500, help="MB of one rank's trace (0: none)")
    p.add_argument("--ranks", default="8,80")
    p.add_argument("--zooms", type=int, default=10)
    p.add_argument("--opens", type=int, default=5)
    args = p.parse_args()
    driver = _driver()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            sizes: list[tuple[str, Callable[[], Path]]] = [
                ("one step (a100_negq's first)", lambda: _one_step(work)),
                ("resnet (1 rank, 5 steps)", lambda: _resnet(work))]
            if args.single:
                sizes.append((f"one rank of {args.single} MB (a100_negq's steps repeated)",
                              lambda: _single(work, args.single)))
            for n in (int(n) for n in args.ranks.split(",") if n):
                sizes.append((f"{n} ranks of a100_negq", lambda n=n: _job(work, n)))
            for label, make in sizes:
                report = make()
                page, seconds, rss = _page(report)
                first, times, steps, said = _measure(driver, page, args.zooms, args.opens)
                beside = sum(f.stat().st_size for d in page.parent.glob("timeline-*")
                             for f in d.iterdir())
                traces = sum(f.stat().st_size for f in report.parent.rglob("*.json")
                             if f.name.endswith(".pt.trace.json"))
                later = [statistics.median(col) for col in zip(*times[1:], strict=True)]
                print(f"{label} ({traces / 1e6:,.1f} MB of traces): {said}; page "
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
