"""Where the memory goes: the memray backend and torch's memory categories, on three bundled
workloads whose truth is known from their own sizes (workloads/mem_*.py), checked against
memray's own ``memray stats`` on the same capture."""

from __future__ import annotations

import bisect
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, perfstack_in

pytest.importorskip("memray")
pytest.importorskip("torch")

#: What workloads/mem_leak.py keeps a step: its outputs, batch x width float32.
LEAK_STEPS, LEAK_BATCH, LEAK_WIDTH = 24, 64, 1024
LEAK_PER_STEP = LEAK_BATCH * LEAK_WIDTH * 4


def _run(tmp: Path, plugins: str, script: str, *args: str,
         options: tuple[str, ...] = ()) -> dict[str, Any]:
    result = perfstack_in(tmp, "run", "-q", "--plugins", plugins, *options, "--repeat", "0",
                          "--warmup", "0", "-o", "report.json",
                          str(ROOT / "workloads" / script), "--", *args, timeout=300)
    assert result.code == 0, result.stderr
    return result.report("report.json")


@pytest.fixture(scope="module")
def leak(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One memray run of the leaking loop; returns its folder and report."""
    tmp = tmp_path_factory.mktemp("leak")
    # Without native frames (4 s less for a run that imports torch): the growth, the peak
    # and the totals are Python's and the allocators' either way; the temporaries' run keeps
    # the default, native frames.
    return tmp, _run(tmp, "memray", "mem_leak.py", "--steps", str(LEAK_STEPS),
                     "--batch-size", str(LEAK_BATCH), "--width", str(LEAK_WIDTH),
                     options=("--memray-no-native",))


@pytest.fixture(scope="module")
def temporaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One memray run of the loop that allocates temporaries."""
    return _run(tmp_path_factory.mktemp("temporaries"), "memray", "mem_temporaries.py",
                "--steps", "8", "--samples", "32", options=("--memray-flamegraph",))


@pytest.fixture(scope="module")
def activations(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The activation-heavy MLP under torch's memory profile (--torch-memory)."""
    return _run(tmp_path_factory.mktemp("activations"), "torch", "mem_activations.py",
                "--steps", "4", options=("--torch-memory",))


def _findings(report: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["rule"] == rule]


def _metric(report: dict[str, Any], name: str) -> Any:
    return next(m["value"] for m in report["metrics"] if m["name"] == name)


def _row(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in report["layers"]["memory"] if r["name"] == name)


def test_a_leak_is_named_with_its_function_and_bytes_per_step(
        leak: tuple[Path, dict[str, Any]]) -> None:
    _, report = leak
    found = _findings(report, "memory.grows")
    assert len(found) == 1, report["findings"]
    assert "remember_outputs (mem_leak.py:" in found[0]["title"], found[0]
    grows = _row(report, "remember_outputs")["values"]["growth_per_step"]["value"]
    assert abs(grows - LEAK_PER_STEP) <= 0.1 * LEAK_PER_STEP, grows
    held = _row(report, "remember_outputs")["values"]["at_exit"]["value"]
    assert held >= LEAK_STEPS * LEAK_PER_STEP, held  # every step's outputs, still held
    # The heap as a whole grows too: how much besides the leak is the run's (other functions
    # keep lazily made buffers from some step on: a quiet run read 340 KiB/step, 30% over);
    # the estimator itself is tested on simulated steps below.
    heap = _metric(report, "heap_growth_per_step")
    assert heap is not None and heap > 0, heap
    assert not _findings(report, "memory.temporaries")


def test_the_heaps_growth_a_step_is_robust_to_steps_that_hold_more() -> None:
    """Each step's low point on simulated steps (fixed seed): a steady 256 KiB a step, noise,
    a fifth of the steps caught mid-step (4 MiB more), a plateau where steps were shorter than
    the snapshots: the median of the pairwise slopes (Theil-Sen) stays within 2% of the
    truth, where a least-squares line does not."""
    import random

    from perfstack_plugins.memray.summary import _robust_slope

    rng = random.Random(31)
    truth = 262_144
    lows = [0] * 60
    for i in range(60):
        lows[i] = (100 << 20) + truth * i + int(rng.gauss(0, 20_000))
        if rng.random() < 0.2 and i > 5:
            lows[i] += 4 << 20  # caught mid-step, while a batch's tensors were alive
    lows[30:33] = [lows[30]] * 3  # three steps read at one snapshot
    robust = _robust_slope(lows)
    assert robust is not None and abs(robust - truth) <= 0.02 * truth, robust
    plain = _least_squares(lows)
    assert abs(plain - truth) > abs(robust - truth)


def _least_squares(values: list[int]) -> float:
    n = len(values)
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    return sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values)) / sum(
        (i - mean_x) ** 2 for i in range(n))


#: What remember_outputs held just after steps 2-23 of a real memray run of mem_leak.py (the
#: suite's, 2026-11-24): 256 KiB more a step, except a step read just before its allocation
#: (0, then twice), and 1.5 MiB that stayed from the ninth step on (a buffer made once).
#: A least-squares line read 325 KiB a step, 24% over; the test of that run failed.
RECORDED_HELD = [525224, 787664, 1050104, 1312544, 1574984, 1837424, 2099864, 2099864,
                 3673496, 3935760, 4198200, 4460640, 4723080, 4985696, 5247960, 5510400,
                 5772840, 5772840, 6297720, 6297720, 6822600, 7085040]


def test_a_functions_growth_a_step_ignores_a_one_off_and_misread_steps() -> None:
    """A function's growth a step is the median of its growth over windows of steps: on the
    recorded series above it is the leak (262,440 bytes: 256 KiB and the tensor's object);
    on simulated series (fixed seed) of 40 steps with a steady 100 KiB a step, each step's
    end read before its allocation one time in four, a one-off 2 MiB that stays from a
    random step on, and a stall of the snapshots over three steps, it stays within 1% of the
    truth, where a least-squares line and the Theil-Sen slope do not."""
    import random

    from perfstack_plugins.memray.capture import Site
    from perfstack_plugins.memray.summary import _robust_slope, growth

    site = Site("mem_leak.py:remember_outputs", "remember_outputs", "mem_leak.py", 25,
                ours=True, at_steps=RECORDED_HELD)
    assert growth(site) == 262_440
    assert _least_squares(RECORDED_HELD) > 1.2 * 262_440
    rng = random.Random(5)
    truth = 102_400
    worse = 0
    for _ in range(200):
        held = [truth * (i + (rng.random() < 0.25)) for i in range(40)]
        jump = rng.randrange(5, 35)
        held[jump:] = [h + (2 << 20) for h in held[jump:]]
        stall = rng.randrange(0, 37)
        held[stall:stall + 3] = [held[stall + 3]] * 3
        found = growth(Site("f.py:f", "f", "f.py", 1, ours=True, at_steps=held))
        assert found is not None and abs(found - truth) <= 0.01 * truth, (found, held)
        others = (_least_squares(held), _robust_slope(held) or 0.0)
        worse += all(abs(o - truth) > 0.01 * truth for o in others)
    assert worse > 100


def test_the_peak_and_totals_are_memray_stats_own(leak: tuple[Path, dict[str, Any]]) -> None:
    """``memray stats`` run by hand on the same capture: the same peak, allocations and
    bytes."""
    folder, report = leak
    capture = folder / ".perfstack" / "runs" / "latest" / "memray" / "memray.bin"
    out = folder / "stats.json"
    subprocess.run([sys.executable, "-m", "memray", "stats", "--json", "-o", str(out), "-f",
                    str(capture)], check=True, capture_output=True, timeout=120)
    stats = json.loads(out.read_text())
    peak = stats["metadata"]["peak_memory"]
    assert abs(_metric(report, "peak_heap") - peak) <= 0.05 * peak
    assert _metric(report, "allocations") == stats["total_num_allocations"]
    assert _metric(report, "allocated_bytes") == stats["total_bytes_allocated"]


def test_temporaries_in_the_loop_are_named(temporaries: dict[str, Any]) -> None:
    found = _findings(temporaries, "memory.temporaries")
    assert len(found) == 1, temporaries["findings"]
    # A comprehension's lists are its function's: the loader's two list-making functions.
    assert re.search(r"most in (decode|normalise) \(mem_temporaries\.py:\d+\)",
                     found[0]["title"]), found[0]
    assert not _findings(temporaries, "memory.grows")
    # memray's own flame graph, asked for, is kept beside the capture.
    kept = next(b for b in temporaries["backends"] if b["name"] == "memray")["artifacts"]
    assert kept["flame graph"].endswith("memray-flamegraph.html"), kept


def test_activations_dominate_and_the_categories_add_up(activations: dict[str, Any]) -> None:
    found = _findings(activations, "memory.activation")
    assert len(found) == 1, activations["findings"]
    assert found[0]["title"].startswith("activations hold "), found[0]
    rows = [r for r in activations["layers"]["memory"] if r["attrs"]["kind"] == "category"]
    total = _metric(activations, "torch_peak_memory")
    assert sum(r["values"]["at_peak"]["value"] for r in rows) == total
    held = {r["attrs"]["category"]: r["values"]["at_peak"]["value"] for r in rows}
    # 12 layers of 4096 x 128 float32 activations saved for the backward pass; 12 weights of
    # 128 x 128 and their biases.
    assert held["activation"] >= 12 * 4096 * 128 * 4
    assert held["parameter"] == 12 * (128 * 128 + 128) * 4


def test_each_module_keeps_its_output_for_the_backward_pass(
        activations: dict[str, Any]) -> None:
    """By nn.Module (the memory profile's allocations over each forward call): every Linear
    and every ReLU of the 12 leaves its 4096 x 128 float32 output allocated, and the whole
    Sequential the 12 ReLU outputs (a Linear's output is freed once its ReLU has run: ReLU
    saves its result, Linear its input)."""
    rows = {r["key"]: r["values"] for r in activations["layers"]["module"]}
    out = 4096 * 128 * 4
    leaves = {k: v for k, v in rows.items() if k != "Sequential_0"}
    assert len(leaves) == 24, sorted(rows)
    assert {k: v["kept"]["value"] for k, v in leaves.items()} == {k: out for k in leaves}
    assert all(v["allocated"]["value"] >= out for v in leaves.values())
    assert rows["Sequential_0"]["kept"]["value"] == 12 * out


def test_the_report_says_where_the_memory_goes(leak: tuple[Path, dict[str, Any]]) -> None:
    folder, _ = leak
    shown = perfstack_in(folder, "show", "report.json", env={"COLUMNS": "80"})
    assert shown.code == 0, shown.stderr
    text = shown.stdout
    assert "Where the memory goes" in text
    section = text.split("Where the memory goes", 1)[1]
    assert "peak heap " in section and "remember_outputs (mem_leak.py:" in section
    assert max(len(line) for line in text.splitlines()) <= 80


def test_every_format_says_the_same_about_memory(leak: tuple[Path, dict[str, Any]]) -> None:
    """The memory section's sentences and holders' table, word for word, in the text, the
    markdown and the HTML."""
    import html

    import perfstack
    from perfstack.analysis.view import build
    from perfstack.render.words.memory import holder_cells, memory_lines

    folder, _ = leak
    view = build(perfstack.load(folder / "report.json"), top=5)
    memory = view.panes["memory"]
    assert memory is not None
    wanted = [*memory_lines(memory), *(c for row in holder_cells(memory) for c in row if c != "—")]

    def flat(text: str) -> str:
        return re.sub(r"\s+", " ", text)

    text = flat(perfstack_in(folder, "show", "report.json", env={"COLUMNS": "200"}).stdout)
    markdown = flat(html.unescape(perfstack_in(folder, "show", "report.json", "--format",
                                               "markdown").stdout.replace("\\", "")))
    page = flat(html.unescape(re.sub(r"<[^>]+>", " ", perfstack_in(
        folder, "show", "report.json", "--format", "html").stdout)))
    for name, shown in (("text", text), ("markdown", markdown), ("html", page)):
        missing = [w for w in wanted if flat(w) not in shown]
        assert not missing, f"{name} lacks {missing}"


def test_the_cuda_allocator_snapshot_is_summarised(tmp_path: Path) -> None:
    """A CUDA caching allocator snapshot in the format torch documents (torch/cuda/memory.py:
    segments of blocks, and the allocator's trace of allocs and frees with their stacks):
    reserve against allocation, fragmentation, the peak replayed and the blocks live then by
    the Python line that allocated them. (Written here in that format; a real one, from an
    H200, is read in the next test.)"""
    from perfstack_plugins.torchprof.cudasnap import summarize
    from perfstack_plugins.torchprof.memcats import MEMORY_SIDECAR
    from perfstack_plugins.torchprof.memrows import memory_categories

    mib = 1 << 20
    here = [{"filename": "/home/u/train.py", "line": 41, "name": "forward"},
            {"filename": "/venv/site-packages/torch/nn/modules/module.py", "line": 1739,
             "name": "_call_impl"}]
    there = [{"filename": "/home/u/train.py", "line": 57, "name": "step"}]
    snapshot = {
        "segments": [
            {"device": 0, "address": 0, "total_size": 20 * mib, "stream": 0,
             "segment_type": "large", "allocated_size": 8 * mib, "active_size": 8 * mib,
             "blocks": [{"size": 8 * mib, "requested_size": 8 * mib, "address": 0,
                         "state": "active_allocated", "frames": here},
                        {"size": 4 * mib, "requested_size": 0, "address": 8 * mib,
                         "state": "inactive", "frames": []},
                        {"size": 2 * mib, "requested_size": 0, "address": 12 * mib,
                         "state": "inactive", "frames": []},
                        {"size": 6 * mib, "requested_size": 0, "address": 14 * mib,
                         "state": "inactive", "frames": []}]}],
        "device_traces": [[
            {"action": "alloc", "addr": 0, "size": 8 * mib, "stream": 0, "frames": here},
            {"action": "alloc", "addr": 8 * mib, "size": 10 * mib, "stream": 0,
             "frames": there},
            {"action": "free_requested", "addr": 8 * mib, "size": 10 * mib, "stream": 0},
            {"action": "free_completed", "addr": 8 * mib, "size": 10 * mib, "stream": 0},
            {"action": "alloc", "addr": 8 * mib, "size": 2 * mib, "stream": 0,
             "frames": there},
            {"action": "free_completed", "addr": 8 * mib, "size": 2 * mib, "stream": 0}]],
    }
    summary = summarize(snapshot)["cuda:0"]
    assert summary["reserved"] == 20 * mib and summary["allocated"] == 8 * mib
    assert summary["largest_free"] == 6 * mib
    assert summary["fragmentation"] == 50.0  # 12 MiB unused, 6 of them outside the largest
    assert summary["peak_allocated"] == 18 * mib
    assert summary["at_peak"] == [{"size": 10 * mib, "where": "step (/home/u/train.py:57)"},
                                  {"size": 8 * mib, "where": "forward (/home/u/train.py:41)"}]
    (tmp_path / MEMORY_SIDECAR).write_text(json.dumps({"cycles": [], "cuda": {"cuda:0":
                                                                               summary}}))
    rows, metrics, findings, _ = memory_categories(tmp_path)
    assert [r.name for r in rows] == ["step (/home/u/train.py:57)",
                                      "forward (/home/u/train.py:41)"]
    by = {m.name: m.value for m in metrics}
    assert by["cuda_reserved"] == 20 * mib and by["cuda_peak_allocated"] == 18 * mib
    # 20 MiB reserved for a peak of 18: the cache kept what the peak needed, no waste
    assert [f.rule for f in findings] == []
    # the same reserve for a peak of 8 MiB: 12 MiB it never needed, half of it in pieces
    summary["peak_allocated"] = 8 * mib
    (tmp_path / MEMORY_SIDECAR).write_text(json.dumps({"cycles": [], "cuda": {"cuda:0":
                                                                               summary}}))
    _, _, findings, _ = memory_categories(tmp_path)
    assert [f.rule for f in findings] == ["memory.fragmented"]
    assert "reserved 2.5x what it ever needed" in findings[0].evidence[0]


def test_the_cuda_allocator_on_a_real_h200_run() -> None:
    """resnet50 on an H200 with --torch-memory (tests/fixtures/gpu-runs/memory): the
    allocator's trace replayed peaks at 7.3 GiB, 4.7 GiB of it one block with no Python frame
    (cuDNN's workspace while it benchmarked its algorithms, in the warm-up steps), where
    torch's profiler saw 2.8 GiB in its three steps; at the end 3.6 GiB reserved, 383 MiB in
    use. The cache holds less than the peak needed: no fragmentation to report (the finding
    once told this run to set expandable_segments)."""
    from perfstack_plugins.torchprof.cudasnap import NO_FRAME
    from perfstack_plugins.torchprof.memrows import cuda_allocator

    saved = json.loads((ROOT / "tests/fixtures/gpu-runs/memory/torch/torch-memory.json")
                       .read_text("utf-8"))
    rows, metrics, findings = cuda_allocator(saved)
    by = {m.name: m.value for m in metrics}
    assert by["cuda_peak_allocated"] == 7849537280 and by["cuda_reserved"] == 3913285632
    assert rows[0].name == NO_FRAME and rows[0].values["at_peak"].value == 5085552560
    assert rows[1].name == "forward (/work/main/workloads/models.py:53)"
    assert findings == []


def test_diff_and_the_history_follow_the_memory(leak: tuple[Path, dict[str, Any]],
                                                tmp_path: Path) -> None:
    """The same report with the leak's function holding twice as much at the peak and the
    heap's peak 50% higher: diff says both, in the memory layer; the history keeps the peak
    as a series that trend reads."""
    from perfstack import history
    from perfstack.report import Report
    from perfstack.report.files import save_report

    _, report = leak
    base = Report.from_dict(report)
    more = Report.from_dict(report)
    for m in more.metrics:
        if m.name == "peak_heap" and isinstance(m.value, (int, float)):
            m.value *= 1.5
    for row in more.layers[next(k for k in more.layers if k.value == "memory")]:
        if row.name == "remember_outputs":
            row.values["at_peak"].value = 2 * (row.values["at_peak"].value or 0)
    save_report(base, tmp_path / "a.json")
    save_report(more, tmp_path / "b.json")
    out = perfstack_in(tmp_path, "diff", "a.json", "b.json", "--format", "json")
    assert out.code in (0, 1), out.stderr
    data = json.loads(out.stdout)
    peak = next(m for m in data["metrics"] if m["name"] == "peak_heap")
    assert peak["change"] == pytest.approx(0.5) and peak["layer"] == "memory", peak
    moved = data["rows"]["memory"]
    assert any(r["key"].startswith("remember_outputs ") and r["change"] == pytest.approx(1.0)
               for r in moved), moved
    db = tmp_path / "h.sqlite"
    for i, rep in enumerate((base, more)):
        rep.run.started = f"2027-01-0{i + 1}T10:00:00+00:00"
        save_report(rep, tmp_path / f"r{i}.json")
        history.add(db, rep, tmp_path / f"r{i}.json")
    trend = perfstack_in(tmp_path, "trend", "--db", str(db), "--format", "json")
    assert trend.code == 0, trend.stderr
    assert "peak_heap" in trend.stdout


def test_a_hook_that_keeps_outputs_is_named_beside_the_code_that_allocated_them() -> None:
    """mem_leak.py --via-hook: a forward hook appends the last layer's output to a list.
    memray charges the 256 KiB a step to the line that called the model (it allocated the
    output); the finding once named only that. The memray run notes every hook the workload
    registers, and the finding names the workload's own beside. The series of what that
    line held after each step wobbles by a few kilobytes (its temporaries): still steady."""
    import torch
    from perfstack_plugins.memray.capture import Capture, Site
    from perfstack_plugins.memray.inproc import HookLog
    from perfstack_plugins.memray.summary import _findings, steady
    from torch.nn.modules import module as modules

    log = HookLog()
    saved = {m: getattr(modules.Module, m) for m in ("register_forward_hook",
                                                     "register_forward_pre_hook")}
    try:
        log.watch(modules)

        def keep_output(mod: object, inputs: object, output: object) -> None:
            pass

        torch.nn.Linear(2, 2).register_forward_hook(keep_output)
    finally:
        for name, method in saved.items():
            setattr(modules.Module, name, method)
    [hook] = log.hooks()
    assert hook["kind"] == "forward" and hook["function"].endswith("keep_output")
    assert hook["classes"] == ["Linear"] and hook["file"] == __file__
    # what the line calling the model held after each step (a real run's first steps)
    held = [23588707, 24115739, 24113235, 24111491, 24375027, 24636019, 25427059, 25689323,
            25422811, 25949083] + [25949083 + 262264 * i for i in range(1, 30)]
    assert steady(held)
    assert not steady([5, 4, 3, 2, 1, 0] * 5)
    site = Site("train (w.py:37)", "train", str(ROOT / "workloads/w.py"), 37, True,
                at_steps=held, at_exit=held[-1])
    capture = Capture(peak_heap=held[-1], peak_at_s=1.0, duration_s=2.0, allocations=1,
                      allocated=held[-1], temporary=0, at_exit=held[-1], peak_rss=None,
                      native=False, sites={site.key: site},
                      heap_at_steps=held, rss_at_steps=[])
    hook["file"] = str(ROOT / "workloads/w.py")
    [grows] = [f for f in _findings(capture, str(ROOT / "workloads"), len(held) + 2, [hook])
               if f.rule == "memory.grows"]
    assert grows.title.endswith("train (w.py:37) allocates it")
    assert "forward hook" in grows.evidence[-1] and "keep_output" in grows.evidence[-1]
    assert grows.action.startswith("look at the hooks above first")


def test_the_memory_curve_rises_step_over_step_and_its_peak_names_what_held_it(
        leak: tuple[Path, dict[str, Any]]) -> None:
    """Issue 66: the leaking loop's run on the timeline: memray's heap over time, sampled
    after each step higher than after the one before, and its peak named with the memory
    layer's own site that held the most at that instant, and the report's peak_heap."""
    from perfstack_plugins.htmlreport.timeline import timeline

    from perfstack.report.files import load_report
    from perfstack.report.units import fmt_bytes

    tmp, report = leak
    data, _ = timeline(load_report(tmp / "report.json"), tmp)
    assert data is not None
    heap = next(t for t in data["tracks"] if t["name"] == "heap (B)")
    steps = next(t for t in data["tracks"] if t["name"].startswith("steps"))
    ends = [a + d for a, d in zip(steps["ts"], steps["dur"], strict=True)][1:-1]
    after = [heap["value"][bisect.bisect_left(heap["ts"], end)] for end in ends]
    # a rising floor: the leak's bytes a step, over the steps (a step shorter than memray's
    # snapshot interval reads the snapshot of the step before, so not every step rises)
    assert after[-1] - after[0] >= 0.7 * (len(after) - 1) * LEAK_PER_STEP, after
    peak = next(t for t in data["tracks"] if t["name"] == "heap peak")
    name = data["names"][peak["name_id"][0]]
    top = max(report["layers"]["memory"], key=lambda r: (r["values"].get("at_peak") or {})
              .get("value") or 0)
    said = f"peak heap {fmt_bytes(_metric(report, 'peak_heap'))}: {top['key']} "
    assert name.startswith(said), (name, said)
    # placed where the sampled heap was highest
    assert peak["ts"][0] == pytest.approx(heap["ts"][heap["value"].index(max(heap["value"]))])
