"""The answer first: one view of a report, from which text, markdown and HTML draw, so no two
formats disagree; the first screen at 80 columns names the workload's own hottest function and
the top finding; names are cut, numbers never; the workload's own code leads.

One real profiled run of the bundled tiny_mlp workload (torch, py-spy, perf record, perf stat,
resources) is shared with the browser tests (``tiny_report``).
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pytest

import perfstack
from perfstack.analysis.view import View, build
from perfstack.analysis.views.drilldown import Node, drill_down
from perfstack.render.text.grid import cut
from perfstack.render.words.common import (
    STATUS_WORDS,
    answer_lines,
    fmt_overhead,
    node_figures,
    pct,
    related_line,
    wall_line,
)
from perfstack.report.units import fmt_seconds, fmt_value
from tests.conftest import ROOT, Result, perfstack_in


@pytest.fixture(scope="module")
def tiny(tiny_report: Path) -> Path:
    """The shared real report of tiny_mlp (tests/conftest.py)."""
    return tiny_report


def show(report: Path, *args: str, columns: int = 80) -> Result:
    return perfstack_in(report.parent, "show", str(report), *args,
                        env={"COLUMNS": str(columns)})


def flat(text: str, markup: str = "") -> str:
    """Text as read, whatever the layout: every run of white space one space (a wrapped
    sentence reads as one line); for ``markup`` "html" the tags gone and entities decoded, for
    "markdown" its escapes undone."""
    if markup == "html":
        text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    elif markup == "markdown":
        text = html.unescape(text.replace("\\", ""))
    return re.sub(r"\s+", " ", text)


def figures(view: View) -> list[str]:
    """Every figure the view defines, as the words every format prints it with."""
    out = [wall_line(view.header), *answer_lines(view)]
    for ln in view.budget.lines:
        out.append(f"{ln.share:.1f}%")
        if ln.seconds is not None:
            out.append(fmt_seconds(ln.seconds))
    out += [related_line(m, True).strip() for ms in view.related.values() for m in ms]

    def walk(nodes: list[Node]) -> None:
        for node in nodes:
            out.append(node_figures(node))
            walk(node.children)

    walk(view.tree)
    for b in view.backends:
        out.append(fmt_overhead(b.overhead, b.overhead_noise))
        out.append(STATUS_WORDS[b.status])
    out += [fmt_value(m.value, m.unit, m.reason) for m in view.metrics]
    out += [f.title for f in view.findings]
    return out


def test_every_format_prints_the_same_figures(tiny: Path) -> None:
    report = perfstack.load(tiny)
    view = build(report, top=5, full=True)  # show's default --top
    text = flat(show(tiny, "--full", columns=200).stdout)
    markdown = flat(show(tiny, "--format", "markdown", "--full").stdout, "markdown")
    page = show(tiny, "--format", "html")
    assert page.code == 0, page.stderr
    # the Metrics table is filled by the page's script from its data: its cells' text
    data = json.loads(page.stdout.split('id="perfstack-data">')[1].split("</script>")[0])
    cells = [c[1] if isinstance(c, list) else str(c) for row in data["tables"]["metrics"]["rows"]
             for c in row["c"]]
    page_text = flat(page.stdout, "html") + " " + flat(" ".join(cells))
    wanted = figures(view)
    assert len(wanted) > 40, wanted
    for name, rendered in (("text", text), ("markdown", markdown), ("html", page_text)):
        missing = [f for f in wanted if flat(f) not in rendered]
        assert not missing, f"{name} lacks {missing[:8]}"


def test_the_first_screen_at_80_columns_answers(tiny: Path) -> None:
    report = perfstack.load(tiny)
    view = build(report, top=5)
    result = show(tiny)
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80, [ln for ln in lines if len(ln) > 80]
    first = flat("\n".join(lines[:25]))
    hottest = view.headline.hottest
    assert hottest is not None and hottest.ours, view.tree
    assert hottest.share is not None
    assert hottest.label.split(" (")[0] in first and pct(hottest.share) in first, first
    top = view.findings[0]
    assert top.title in first, (top.title, first)
    # Short: the answer, the findings, the budget and the drill-down, not every table. How
    # many findings a live run raises is the run's to say (a line count failed on 101 of
    # 100); what the short form bounds is each part: a finding in at most 7 lines (its title
    # in 2, one piece of evidence in 2, the action in 3), the layers as one paragraph, a
    # the headline metrics (no detail ones).
    text = result.stdout
    block = text[text.index("\nFindings"):text.index("\nWhere the time goes")]
    per_finding = re.split(r"\n(?=  \[)", block)[1:]
    assert len(per_finding) == len(view.findings)
    assert all(len(f.strip("\n").splitlines()) <= 7 for f in per_finding), per_finding
    assert "\nLayers (--full shows their top rows)\n" in text
    shown = re.search(r"\nMetrics \((\d+)", text)
    assert shown is not None and int(shown[1]) == len(view.metrics), shown
    assert all(not m.detail for m in view.metrics)
    # The workload's own code leads; library code is folded by name, never shown by its
    # absolute path inside a virtual environment.
    assert "site-packages" not in result.stdout and str(ROOT) not in result.stdout.replace(
        "$ python " + str(ROOT), "")
    # How many of the workload's own functions py-spy caught (and so how far down torch's
    # folded row comes) is the run's to say: five of them once pushed it out of the first
    # screen's five. Where the drill-down reaches it, it reads as one name.
    nodes, _ = drill_down(report, top=1000, depth=1)
    [folded] = [n for n in nodes if n.key == "library:torch"]
    assert folded.label.startswith("[torch] "), folded.label
    assert ("[torch] " in result.stdout) == any(n.key == folded.key for n in view.tree)
    reached = show(tiny, "--top", str(nodes.index(folded) + 1))
    assert folded.label in reached.stdout, reached.stdout


@pytest.mark.parametrize("columns", [80, 120])
def test_names_are_cut_and_numbers_never(tiny: Path, columns: int) -> None:
    report = perfstack.load(tiny)
    result = show(tiny, "--full", columns=columns)
    lines = result.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= columns
    text = result.stdout
    for m in report.metrics:
        assert fmt_value(m.value, m.unit, None if m.value is not None else "n/a") in text, m.name
    for ln in build(report).budget.lines:
        assert f"{ln.share:.1f}%" in text


def test_all_frames_shows_the_library_functions(tiny: Path) -> None:
    """A library's functions are one row, "[torch] N functions", unless --all-frames shows
    each. Which rows lead is the run's to say (how many functions py-spy caught, and for how
    long): --top reaches every row here."""
    report = perfstack.load(tiny)
    folded_nodes, _ = drill_down(report, top=1000, depth=1)
    every_nodes, _ = drill_down(report, top=1000, depth=1, all_frames=True)
    top = str(max(len(folded_nodes), len(every_nodes)))
    folded = show(tiny, "--depth", "1", "--top", top, columns=200).stdout
    every = show(tiny, "--depth", "1", "--all-frames", "--top", top, columns=200).stdout
    tree = every[every.index("Drill-down"):every.index("Layers")]
    torch_functions = [n.label.split(" (")[0] for n in every_nodes if n.library == "torch"]
    assert torch_functions, [n.label for n in every_nodes]
    assert "[torch]" not in tree and f"[torch] {len(torch_functions)} function" in folded
    assert all(name in tree for name in torch_functions), (torch_functions, tree)


def test_the_printed_lines_are_the_median_runs(tiny: Path) -> None:
    report = perfstack.load(tiny)
    view = build(report)
    throughput = report.metric("throughput")
    assert throughput is not None and throughput.value is not None
    assert view.header.printed_median_of == "throughput"
    printed = next(ln for ln in view.header.printed if ln.startswith("throughput:"))
    value = float(printed.split(":")[1].split()[0])
    assert value == pytest.approx(float(throughput.value), rel=1e-3)


def test_backend_states_say_what_happened(tiny: Path) -> None:
    report = perfstack.load(tiny)
    text = show(tiny).stdout
    block = text[text.index("Backends"):]
    for b in report.backends:
        row = next(ln for ln in block.splitlines() if ln.strip().startswith(b.name + " "))
        assert STATUS_WORDS[b.status.value] in row, row
    # (perf's partial status where a counter could not be read: tests/test_linuxperf.py.)


def test_raw_outputs_are_pointed_to_with_their_openers(tiny: Path) -> None:
    text = show(tiny).stdout
    block = text[text.index("Raw outputs"):]
    trace = re.search(r"torch trace: (\S+\.pt\.trace\.json)", block)
    assert trace, block
    folder = re.search(r"Raw outputs, in (\S+)/", block)
    base = tiny.parent / folder[1] if folder else tiny.parent
    assert (base / trace[1]).is_file()
    assert "ui.perfetto.dev" in block and "speedscope" in block and "perf report -i" in block


def test_markdown_show_has_the_budget_and_the_drill_down(tiny: Path) -> None:
    md = show(tiny, "--format", "markdown").stdout
    assert "**Answer.**" in md
    assert md.index("### Findings") < md.index("### Where the time goes") \
        < md.index("### Drill-down")
    assert "<details>" in md


def test_the_html_charts_draw_the_drill_down_rows(tiny: Path) -> None:
    report = perfstack.load(tiny)
    view = build(report, top=5, full=True)
    page = show(tiny, "--format", "html").stdout
    chart = page[page.index('id="top-functions"'):]
    chart = chart[:chart.index("</svg>")]
    labels = [html.unescape(t) for t in re.findall(r"<text[^>]*><title>([^<]*)</title>", chart)]
    assert labels == [n.label for n in view.tree if n.seconds is not None]


def test_load_gives_records_and_dataframes(tiny: Path) -> None:
    report = perfstack.load(str(tiny))
    records = report.records("python")
    assert records and {"key", "name", "source"} <= set(records[0])
    timed = [r for r in records if r.get("self_time") is not None]
    assert timed and all(r["self_time_unit"] == "s" for r in timed)
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            report.dataframe("python")
    else:
        frame = report.dataframe("python")
        assert len(frame) == len(records)


def test_umask_is_respected(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    old = os.umask(0o022)
    try:
        result = show(tiny, "--format", "markdown", "-o", str(out))
    finally:
        os.umask(old)
    assert result.code == 0, result.stderr
    assert out.stat().st_mode & 0o777 == 0o644


def test_a_cut_action_ends_between_words() -> None:
    """At 80 columns an action cut to three lines ended 'for a benc…' or 'import heavy…'."""
    from perfstack.render.text.grid import wrap
    from perfstack.render.text.opening import at_most as _at_most

    action = ("→ an import made inside your own function runs the first time that call is made "
              "(a one-time cost of the process, not of each step); measure each import with "
              "'python -X importtime script.py 2> imports.log'; import heavy modules at the top "
              "for a benchmark")
    lines = _at_most(3, wrap(action, 80, indent=6, first="    "), 80)
    assert len(lines) == 3 and all(len(line) <= 80 for line in lines)
    assert lines[-1].endswith(" …")
    kept = " ".join(line.strip() for line in lines)[:-2].split()
    assert kept == action.split()[:len(kept)]  # every word kept is whole


def test_no_empty_metrics_table() -> None:
    """'Metrics (0; 345 more with --full)' printed a table header over no rows."""
    from perfstack.analysis.view import build
    from perfstack.render.text import render_view
    from perfstack.report.files import load_report

    view = build(load_report(ROOT / "tests/fixtures/reports/resnet50.json.gz"), full=False)
    view.hidden_metrics += len(view.metrics)
    view.metrics = []
    text = render_view(view, 80)
    assert f"Metrics: {view.hidden_metrics}, shown above or with --full" in text
    assert "metric  " not in text.split("Metrics:")[1]


def test_two_shapes_of_one_op_stay_apart_when_cut() -> None:
    """An op's row keeps the ends of its shapes when cut; aten::addmm's end in two scalar
    arguments ('[]'), the same in every row, so two of its shapes were cut to one text at 80
    columns ('aten::addmm [[512],[6…2],[],[]]' twice, in the README's own run)."""
    rows = ["aten::addmm [[512], [64, 512], [512, 512], [], []]",
            "aten::addmm [[512], [64, 256], [256, 512], [], []]"]
    for width in (31, 33, 38):
        shown = [cut(r, width) for r in rows]
        assert shown[0] != shown[1] and all(len(s) <= width for s in shown), shown
    # The scalars become one '…' (more arguments follow); then a third of the room goes to
    # the start and two to the end, where an op's rows differ (here the weight).
    assert cut(rows[0], 40) == "aten::addmm [[512],[64,512],[512,512],…]"
    assert cut(rows[0], 31) == "aten::addmm [[512…[512,512],…]"
    # Whole when it fits; shapes without trailing scalars are cut as before.
    assert cut(rows[0], 50) == rows[0]
    assert cut("aten::mm [[512, 64], [64, 512]]", 26) == "aten::mm [[512…,[64,512]]"
    # In a drill-down's narrow room the start keeps four characters, not a third.
    assert cut("aten::mm [[64, 512], [512, 512]]", 19) == "aten::mm [[64…12]]"


def test_a_graph_break_keeps_its_line_when_cut() -> None:
    """A graph break's row names a place inside a function and then torch's reason: cut at
    80 columns, the diff's table once showed 'graph break in forward (compiled.py:5…', the
    line lost. The line stays; then the path loses its start, and the reason goes first."""
    text = ("graph break in forward (workloads/compiled.py:51): Unsupported Tensor.item() "
            "call with capture_scalar_outputs=False")
    assert cut(text, 38) == "graph break in forward (…piled.py:51)…"
    assert cut(text, 60) == "graph break in forward (workloads/compiled.py:51): Unsuppor…"
    for width in range(34, 100):  # narrower, the function name goes before the line
        shown = cut(text, width)
        assert len(shown) <= width and ":51)" in shown, (width, shown)
    assert cut(text, 200) == text
    frame = "after the break in forward (workloads/compiled.py:51)"
    assert cut(frame, 38) == "after the break in forward (…ed.py:51)"
