"""The HTML report in a real browser, and the merged Perfetto trace, on a real run of a
workload whose op and function names are markup (``<script>``, pipes, markdown, a link).

Chromium is Debian's package, installed by ``scripts/install-chromium.sh`` (the session
fixture runs it); the page is opened headless from the file, offline.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.conftest import Result

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions")


def _browser(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


def test_html_is_self_contained_and_escaped(markup_run: Path) -> None:
    page = markup_run.with_suffix(".html").read_text("utf-8")
    # Ours only: the data (JSON, with no "<" in it), the timeline's data (read when its pane
    # is first shown) and the script; the workload's <script> is data, written as text.
    assert page.count("<script") == 4
    assert '<script type="application/json" id="perfstack-data">' in page
    assert '<script type="application/gzip+base64" id="perfstack-timeline">' in page
    assert "<script>alert" not in page
    data = json.loads(page.split('id="perfstack-data">')[1].split("</script>")[0])
    names = [r["c"][0] for t in data["tables"].values() for r in t["rows"]]
    assert any("<script>alert('x')</script>" in n for n in names), names[:5]
    # Nothing is fetched: no external scripts, styles, images or fonts.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    assert page.index('id="findings"') < page.index('id="backends"') < page.index('id="metrics"')


def test_html_renders_in_chromium(markup_run: Path, chromium: str, tmp_path: Path) -> None:
    page = markup_run.with_suffix(".html")
    dom = _browser(chromium, tmp_path / "p1", "--enable-logging=stderr", "--v=0",
                   "--virtual-time-budget=3000", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body, dom.stdout[:500]
    assert 'data-ready="1"' in body[0], body[0]
    assert "data-errors" not in body[0], body[0]
    charts = int(re.search(r'data-charts="(\d+)"', body[0])[1])  # type: ignore[index]
    assert charts >= 4, body[0]  # budget, top ops, top functions, flame graph
    console = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln]
    assert not [ln for ln in console if re.search(r"error|uncaught", ln, re.I)], console
    for element in ('id="budget-chart"', 'id="top-ops"', 'id="top-functions"',
                    'id="flamegraph"', 'id="findings"', 'id="backends"', 'id="drill-down"'):
        assert element in dom.stdout, element
    # The browser's DOM holds the workload's name as text, never as an element.
    assert "<script>alert" not in dom.stdout and "&lt;script&gt;alert" in dom.stdout

    shot = tmp_path / "shot.png"
    got = _browser(chromium, tmp_path / "p2", "--window-size=1280,2400",
                   f"--screenshot={shot}", page.as_uri())
    assert got.returncode == 0 and shot.is_file(), got.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    colours = {c: n for n, c in image.getcolors(maxcolors=1 << 24) or []}
    total = image.width * image.height
    inked = sum(n for c, n in colours.items() if sum(c) < 720)  # anything but near-white
    assert len(colours) > 50, "a blank page"
    assert inked / total > 0.05, f"only {inked / total:.1%} of the page is drawn"
    # The budget bar's python (blue) and native (orange) parts are painted.
    assert any(abs(r - 0x4E) < 8 and abs(g - 0x79) < 8 and abs(b - 0xA7) < 8
               for (r, g, b) in colours), "no python-layer colour on the page"


def _trace(perfstack: Any, report: Path) -> dict[str, Any]:
    result: Result = perfstack("show", str(report), "--format", "perfetto", "-o",
                               str(report.parent / "trace.json"))
    assert result.code == 0, result.stderr
    data: dict[str, Any] = json.loads((report.parent / "trace.json").read_text("utf-8"))
    return data


def test_perfetto_trace_has_a_process_per_backend_aligned_at_start(
        markup_run: Path, perfstack: Any) -> None:
    trace = _trace(perfstack, markup_run)
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert any(n.startswith("torch run") for n in names.values()), names
    assert any(n.startswith("pyspy run") for n in names.values()), names
    torch_pid = next(p for p, n in names.items() if n.startswith("torch run"))
    spy_pid = next(p for p, n in names.items() if n.startswith("pyspy run"))
    report = json.loads(markup_run.read_text("utf-8"))
    walls = {r["backend"]: r["wall_s"] for r in report["run"]["runs"] if r["backend"]}
    ops = [e for e in events if e["pid"] == torch_pid and e.get("cat") == "cpu_op"]
    assert any(e["name"] == "aten::tanh" for e in ops)
    assert any(e["name"].startswith("<script>") for e in events if e["pid"] == torch_pid)
    for e in ops:  # within the torch run, measured from its workload's start
        assert 0 <= e["ts"] <= walls["torch"] * 1e6, e
    begins = Counter((e["tid"], e["name"]) for e in events
                     if e["pid"] == spy_pid and e["ph"] == "B")
    ends = Counter((e["tid"], e["name"]) for e in events if e["pid"] == spy_pid and e["ph"] == "E")
    assert begins and begins == ends  # every py-spy slice is closed
    assert any(name.startswith("spin (") for _, name in begins)
    spy_ts = [e["ts"] for e in events if e["pid"] == spy_pid and "ts" in e]
    assert min(spy_ts) >= 0 and max(spy_ts) <= walls["pyspy"] * 1e6
    assert trace["metadata"]["backends"] == ["torch", "pyspy"]


@pytest.mark.skipif(not os.environ.get("PERFSTACK_TRACE_PROCESSOR"),
                    reason="Perfetto's trace_processor_shell is not on this machine: the "
                    "perfetto package downloads it at run time, which these machines cannot; "
                    "set PERFSTACK_TRACE_PROCESSOR to a local binary to run this check")
def test_perfetto_trace_loads_in_perfettos_trace_processor(markup_run: Path,
                                                          perfstack: Any) -> None:
    """Where a trace_processor_shell exists: the merged trace loads, with the torch and py-spy
    process groups, their threads' slices, and the workload's ops among them."""
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    _trace(perfstack, markup_run)
    config = TraceProcessorConfig(bin_path=os.environ["PERFSTACK_TRACE_PROCESSOR"])
    tp = TraceProcessor(trace=str(markup_run.parent / "trace.json"), config=config)
    try:
        processes = {r.name for r in tp.query("select name from process")}
        assert any(str(n).startswith("torch run") for n in processes), processes
        assert any(str(n).startswith("pyspy run") for n in processes), processes
        slices = {r.name for r in tp.query("select distinct name from slice")}
        assert "aten::tanh" in slices
        assert any(str(n).startswith("spin (") for n in slices)
    finally:
        tp.close()


def test_each_hardware_cell_is_written_in_its_own_rows_unit(tiny_report: Path) -> None:
    """The resources table printed every row in the first row's unit: 'peak resident memory
    (max RSS) 734,806,016 s', 'minor page faults 300,468 s'."""
    from perfstack_plugins.htmlreport.tables import MIXED, layer_tables

    from perfstack.report import Layer
    from perfstack.report.files import load_report
    from perfstack.report.units import fmt_value

    report = load_report(tiny_report)
    spec = layer_tables(report, Layer.HARDWARE)["hardware-resources"]
    assert all(c["unit"] == MIXED and not c["sum"] for c in spec["columns"][1:])
    rows = {r.key: r for r in report.layers[Layer.HARDWARE] if r.source == "resources"}
    for entry in spec["rows"]:
        row = rows[entry["k"]]
        q = row.values["median"]
        assert entry["c"][1][1] == fmt_value(q.value, q.unit, q.reason), entry
    rss = next(e for e in spec["rows"] if e["k"] == "rusage.max_rss_bytes")
    assert rss["c"][1][1].endswith("MiB"), rss


def test_top_ops_rank_as_the_table_and_keep_their_names(tiny_report: Path) -> None:
    """'Top ops' cut labels from the left (the op's name lost), read '1.64e+03 ms', and ranked
    by self time while the table beside it ranked by total."""
    import re

    from perfstack_plugins.htmlreport.charts import short_label
    from perfstack_plugins.htmlreport.tables import layer_tables

    from perfstack.report import Layer
    from perfstack.report.files import load_report

    page = tiny_report.with_name("report.html").read_text("utf-8")
    chart = page[page.index('id="top-ops"'):]
    chart = chart[:chart.index("</svg>")]
    shown = re.findall(r"<rect [^>]*><title>(.*?): ([^<]*)</title>", chart)
    assert shown, chart[:500]
    assert not any("e+" in value or "e-" in value for _, value in shown)
    assert all(value.endswith(" self") for _, value in shown)
    report = load_report(tiny_report)
    ops = {r.name: r for r in report.layers[Layer.FRAMEWORK] if r.source == "torch"}
    own = [ops[name.replace("&gt;", ">").replace("&lt;", "<")].values["self"].value
           for name, _ in shown]
    assert own == sorted(own, reverse=True)  # largest first, by what the bars show
    spec = layer_tables(report, Layer.FRAMEWORK)["framework-torch"]
    assert spec["columns"][spec["sort"]]["name"] == "self"  # the table ranks alike
    long = "aten::addmm [[512], [64, 512], [512, 512], [], []] with more shapes after it"
    assert short_label(long).startswith("aten::addmm [[512]") and short_label(long).endswith("…")
    assert short_label("step (" + "/deep" * 20 + "/train.py:42)").startswith("step (…")
    assert short_label("step (" + "/deep" * 20 + "/train.py:42)").endswith("/train.py:42)")


def test_functions_and_threads_are_tables_of_their_own_in_words() -> None:
    """py-spy's functions table once had every value of every row kind as a column, named as
    the JSON names them (self_time, self, own_time, own, samples, time): half of it empty.
    Threads get their own table; the headers are words, the JSON's name a tooltip."""
    from perfstack_plugins.htmlreport.tables import layer_tables

    from perfstack.report import Layer
    from perfstack.report.files import load_report
    from tests.conftest import ROOT

    report = load_report(ROOT / "tests/fixtures/reports/rules/threads_gil.json.gz")
    tables = layer_tables(report, Layer.PYTHON)
    functions, threads = tables["python-pyspy"], tables["python-pyspy-thread"]
    names = [c.get("name") for c in functions["columns"]]
    assert "time" not in names and "samples" not in names, names
    assert [c["title"] for c in functions["columns"][:4]] == ["name", "code", "own time", "own %"]
    assert threads["title"] == "threads from pyspy"
    assert {c.get("name") for c in threads["columns"]} >= {"time", "samples", "gil_share"}
    assert all(len(r["c"]) == len(threads["columns"]) for r in threads["rows"])


def test_a_memory_axis_reads_apart_at_its_ends_and_never_in_exponents() -> None:
    """The resident memory of a steady run, 347.2 to 347.9 MiB: both ends of the chart's axis
    read '347 MiB'; and 1,020 MiB was written '1.02e+03 MiB'."""
    from perfstack_plugins.htmlreport.panes.memory import _chart

    from perfstack.report import Better, Metric
    from perfstack.report.units import fmt_bytes

    mib = 2 ** 20
    steady = Metric("step_resident", 347.9 * mib, "B", "run", "baseline", Better.LOWER,
                    samples=[347.2 * mib, 347.5 * mib, 347.9 * mib], samples_of="steps")
    ends = re.findall(r'text-anchor="end">([^<]*MiB)</text>', _chart(steady, "#000", "x", "c"))
    assert len(ends) == 2 and ends[0] != ends[1], ends
    assert fmt_bytes(1020 * mib) == "1,020 MiB" and "e+" not in fmt_bytes(1023.9 * mib)


def test_a_stack_thousands_of_frames_deep_draws_cut_and_marked(tmp_path: Path) -> None:
    """Issue 57: a workload recursing 3,000 deep (here a py-spy profile with one stack of
    5,000 frames) made `show --format html` an internal error (RecursionError in the flame
    graph's conversion). The flame is built without recursion and cut at MAX_DEPTH frames,
    the rest one frame that says how many more there were."""
    import gzip
    import sys

    from perfstack_plugins.htmlreport.flame import MAX_DEPTH, flame_tree

    from perfstack.report.files import load_report

    folder = tmp_path / "run"
    (folder / "pyspy").mkdir(parents=True)
    frames = [{"name": "down", "file": str(tmp_path / "deep.py"), "line": 3}] * 5000
    profile = {"$schema": "https://www.speedscope.app/file-format-schema.json",
               "shared": {"frames": [dict(f, line=i + 1) for i, f in enumerate(frames)]},
               "profiles": [{"type": "sampled", "name": 'Thread 1 "MainThread"',
                             "unit": "seconds", "startValue": 0, "endValue": 1,
                             "samples": [list(range(5000))] * 4, "weights": [0.01] * 4}]}
    (folder / "pyspy" / "profile.speedscope.json").write_text(json.dumps(profile))
    with gzip.open(Path(__file__).parent / "fixtures/reports/split_60_40.json.gz", "rt") as fh:
        data = json.load(fh)
    for entry in data["backends"]:
        if entry["name"] == "pyspy":
            entry["artifacts"] = {"speedscope": "pyspy/profile.speedscope.json"}
    (folder / "report.json").write_text(json.dumps(data))
    tree, why = flame_tree(load_report(folder / "report.json"), folder)
    assert tree is not None, why
    depth, node = 0, tree
    while node["c"]:
        node, depth = node["c"][0], depth + 1
    assert depth == MAX_DEPTH + 2  # below all threads: the thread, MAX_DEPTH frames, the cut
    assert node["n"].startswith("… ") and "cut at" in node["n"]
    assert node["v"] == pytest.approx(0.04)
    out = tmp_path / "deep.html"
    shown = subprocess.run([sys.executable, "-m", "perfstack", "show",
                            str(folder / "report.json"), "--format", "html", "-o", str(out)],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "the flame is cut at" in out.read_text()
