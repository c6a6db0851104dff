"""Where in the model the time goes: torch.profiler's nn.Module calls (recorded with Python
stacks) as the module layer, checked against a plain count of the same trace's events, and
the view every format prints from it."""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from perfstack.report import Layer, Quantity, Report, Row, RunInfo
from tests.conftest import perfstack_in

pytest.importorskip("torch")

US = 1e-6


def _trace(report: Path) -> dict[str, Any]:
    [path] = (report.parent / ".perfstack/runs/latest/torch").glob("*.pt.trace.json")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _plain_count(trace: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each module path's calls, forward and backward time, counted here from the events
    alone: a module call's parent is the shortest other call on its thread that holds it; a
    flow's forward end belongs to the innermost call holding it, its backward op is the
    longest op starting where the flow ends."""
    events = trace["traceEvents"]
    calls = [e for e in events if e.get("cat") == "python_function"
             and e.get("name", "").startswith("nn.Module: ")]

    def holders(tid: Any, t: float) -> list[dict[str, Any]]:
        found = [c for c in calls if c["tid"] == tid and c["ts"] <= t <= c["ts"] + c["dur"]]
        return sorted(found, key=lambda c: c["dur"])

    def path(call: dict[str, Any]) -> str:
        above = [c for c in holders(call["tid"], call["ts"]) if c is not call
                 and c["ts"] + c["dur"] >= call["ts"] + call["dur"] and c["dur"] > call["dur"]]
        own = call["name"][len("nn.Module: "):]
        return f"{path(above[0])}/{own}" if above else own

    out: dict[str, dict[str, float]] = defaultdict(lambda: {"calls": 0, "forward": 0.0})
    paths = {id(c): path(c) for c in calls}
    for c in calls:
        out[paths[id(c)]]["calls"] += 1
        out[paths[id(c)]]["forward"] += c["dur"] * US
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    starts = {e["id"]: e for e in events if e.get("cat") == "fwdbwd" and e.get("ph") == "s"}
    backward: dict[str, set[int]] = defaultdict(set)
    for end in (e for e in events if e.get("cat") == "fwdbwd" and e.get("ph") == "f"):
        start = starts.get(end["id"])
        if start is None:
            continue
        inner = holders(start["tid"], start["ts"])
        at = [o for o in ops if o["tid"] == end["tid"] and abs(o["ts"] - end["ts"]) < 1e-3]
        if not inner or not at:
            continue
        op = max(at, key=lambda o: o["dur"])
        for c in inner:
            backward[paths[id(c)]].add(id(op))
    durations = {id(o): o["dur"] * US for o in ops}
    for key, ids in backward.items():
        out[key]["backward"] = sum(durations[i] for i in ids)
    return out


def test_modules_agree_with_a_plain_count_of_the_trace(tiny_report: Path) -> None:
    """tiny_mlp's Sequential of Linear and ReLU, profiled with Python stacks: one row per
    module path with its calls, forward and backward time exactly as the events add up."""
    report = json.loads(tiny_report.read_text())
    rows = {r["key"]: r for r in report["layers"]["module"]}
    counted = _plain_count(_trace(tiny_report))
    assert set(rows) == set(counted) and "Sequential_0/Linear_1" in rows, sorted(rows)
    # Equal to the float precision of the trace's times (µs near 5e12: about a nanosecond an
    # event's end, summed over a few calls and ops).
    for key, want in counted.items():
        values = rows[key]["values"]
        assert values["calls"]["value"] == want["calls"], key
        assert values["forward"]["value"] == pytest.approx(want["forward"], rel=1e-5, abs=2e-8), key
        assert values["backward"]["value"] == pytest.approx(want.get("backward", 0.0),
                                                            rel=1e-5, abs=2e-8), key
    root = rows["Sequential_0"]["values"]
    children = [r["values"] for r in rows.values() if r["attrs"].get("parent") == "Sequential_0"]
    assert root["self"]["value"] == pytest.approx(
        root["forward"]["value"] - sum(c["forward"]["value"] for c in children), abs=1e-8)
    # Each step trains: every Linear's backward was found, and the root's is its children's.
    assert all(rows[k]["values"]["backward"]["value"] > 0 for k in rows if "Linear" in k)
    assert root["backward"]["value"] == pytest.approx(
        sum(c["backward"]["value"] for c in children), rel=1e-5, abs=2e-8)
    # The rows are in the model's order: each parent before its children.
    keys = [r["key"] for r in report["layers"]["module"]]
    assert keys[0] == "Sequential_0" and keys.index("Sequential_0/Linear_0") < keys.index(
        "Sequential_0/Linear_1")


def _small_relus(report: Path, folder: Path) -> Path:
    """A copy of ``report`` whose ReLU modules each take 1.5% of the model's time: under the
    3% the short view lists, over the 0.5% of the full one, on any run."""
    data = json.loads(report.read_text())
    rows = data["layers"]["module"]
    root = next(r for r in rows if "parent" not in r["attrs"])
    model = root["values"]["forward"]["value"] + root["values"]["backward"]["value"]
    for row in rows:
        if "ReLU" in row["key"]:
            for name in ("forward", "self", "backward"):
                row["values"][name]["value"] = 0.0075 * model
    out = folder / "small-relus.json"
    out.write_text(json.dumps(data))
    return out


@pytest.mark.parametrize("variant", ["as recorded", "ReLUs under 3%"])
def test_every_format_prints_the_same_module_view(tiny_report: Path, tmp_path: Path,
                                                   variant: str) -> None:
    """The module section's sentences and tree, word for word, in the text (at 80 columns
    too), the markdown and the HTML's Modules pane; also where modules fall between the
    short view's line and the full one's (the markdown and HTML are the full report)."""
    import perfstack
    from perfstack.analysis.view import build
    from perfstack.render.words.modules import module_cells, module_lines

    if variant != "as recorded":
        tiny_report = _small_relus(tiny_report, tmp_path)
        assert "smaller module(s) of" in " ".join(
            module_lines(build(perfstack.load(tiny_report)).panes["modules"] or _none()))

    def wanted_in(full: bool) -> list[str]:
        view = build(perfstack.load(tiny_report), top=5, full=full)
        modules = view.panes["modules"]
        assert modules is not None and modules.backward is not None
        return [*module_lines(modules), *(c.strip() for row in module_cells(modules) for c in row)]

    def flat(text: str) -> str:
        return re.sub(r"\s+", " ", text.replace("\u2003", " "))

    folder = tiny_report.parent
    at_80 = perfstack_in(folder, "show", tiny_report.name, env={"COLUMNS": "80"}).stdout
    assert "Where in the model the time goes (by nn.Module)" in at_80
    assert max(len(line) for line in at_80.splitlines()) <= 80
    text = flat(perfstack_in(folder, "show", tiny_report.name, env={"COLUMNS": "200"}).stdout)
    markdown = flat(html.unescape(perfstack_in(folder, "show", tiny_report.name, "--format",
                                               "markdown").stdout.replace("\\", "")))
    page = perfstack_in(folder, "show", tiny_report.name, "--format", "html").stdout
    pane = page[page.index('id="pane-modules"'):]
    pane = flat(html.unescape(re.sub(r"<[^>]+>", " ", pane[:pane.index("</main>")])))
    # The markdown and the HTML are the full report (every module from 0.5% of the model, not
    # 3%): which modules fall between the two depends on the run, so they hold the full view.
    for name, shown, full in (("text", text, False), ("markdown", markdown, True),
                              ("html", pane, True)):
        missing = [w for w in wanted_in(full) if flat(w) not in shown]
        assert not missing, f"{name} lacks {missing}"


def _none() -> Any:
    raise AssertionError("no module view")


def _row(path: str, forward: float, backward: float | None, rank: int | None = None) -> Row:
    parent, _, name = path.rpartition("/")
    values = {"calls": Quantity(2, "count"), "forward": Quantity(forward, "s"),
              "self": Quantity(forward, "s")}
    if backward is not None:
        values["backward"] = Quantity(backward, "s")
    attrs: dict[str, Any] = {"module": name.rpartition("_")[0], "depth": path.count("/")}
    if parent:
        attrs["parent"] = parent
    key = path
    if rank is not None:
        attrs["rank"] = rank
        key = f"rank{rank}:{path}"
    return Row(key, key, "torch", values, attrs)


def _report(rows: list[Row]) -> Report:
    report = Report(run=RunInfo(command=["python", "train.py"], cwd="/", started="",
                                duration_s=1.0, perfstack_version="0", repeat=1, warmup=0,
                                timeout_s=None, complete=True), environment={})
    report.layers[Layer.MODULE] = rows
    return report


def test_the_view_lists_the_largest_modules_with_their_parents() -> None:
    """A module is listed from 3% of the model's time, with every module above it (so the
    tree reads), at most ``top`` of them; the by-type line counts modules with none inside."""
    from perfstack.analysis.panes.modules import module_view

    rows = [_row("Net_0", 0.6, 0.4), _row("Net_0/Block_0", 0.5, 0.35),
            _row("Net_0/Block_0/Conv_0", 0.45, 0.3), _row("Net_0/Block_0/Relu_0", 0.01, 0.0),
            _row("Net_0/Head_0", 0.09, 0.05)]
    view = module_view(_report(rows))
    assert view is not None
    assert [ln.key for ln in view.lines] == ["Net_0", "Net_0/Block_0", "Net_0/Block_0/Conv_0",
                                             "Net_0/Head_0"]
    assert [round(ln.share, 6) for ln in view.lines] == [100, 85, 75, 14]
    assert view.more == 1 and view.model == pytest.approx(1.0)
    assert view.largest is not None and view.largest.key == "Net_0/Block_0/Conv_0"
    assert [(k, round(s, 6), n) for k, s, n in view.kinds] == [("Conv", 75, 1), ("Head", 14, 1),
                                                               ("Relu", 1, 1)]
    only = module_view(_report(rows), top=1)
    assert only is not None and [ln.key for ln in only.lines] == ["Net_0"]


def test_a_job_shows_its_lowest_rank_and_inference_has_no_backward() -> None:
    from perfstack.analysis.panes.modules import module_view
    from perfstack.render.words.modules import module_lines

    rows = [_row(p, f, None, rank) for rank in (1, 0) for p, f in
            (("Net_0", 1.0 + rank), ("Net_0/Linear_0", 0.5))]
    view = module_view(_report(rows))
    assert view is not None and view.rank == 0 and view.ranks == 2
    assert [ln.key for ln in view.lines] == ["Net_0", "Net_0/Linear_0"]
    assert view.backward is None and all(ln.backward is None for ln in view.lines)
    said = " ".join(module_lines(view))
    assert "rank 0's (of 2 ranks) modules take 1 s" in said and "no backward" in said
    assert module_view(_report([])) is None
