"""Issue 72: compiling counted as compiling. py-spy's main pass samples running code only, so
the main thread waiting for torch.compile's C++ compiler or compile workers read as
"waiting"; the wait pass (every sample, idle ones too, at a low rate) counts those waits as
compiling, says where the main thread waits otherwise, and counts a DataLoader's reads as
loading."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: `perfstack run --plugins dynamo,pyspy,torch tests/workloads/compile_loop.py -- --break`,
#: its pyspy run (README.md beside it)
RUN = ROOT / "tests" / "fixtures" / "pyspy-runs" / "compile_break"


def _speedscope(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    data = json.loads(gzip.decompress((RUN / name).read_bytes()))
    return data["shared"]["frames"], data["profiles"]


def _recorded() -> dict[str, Any]:
    return json.loads((RUN / "run.json").read_text("utf-8"))


def _pyspy_run(folder: Path, workload: str, *options: str) -> dict[str, Any]:
    """`perfstack run --plugins pyspy` of a test workload, no baseline run: its report."""
    out = folder / "r.json"
    subprocess.run([sys.executable, "-m", "perfstack", "run", "-q", "--plugins", "pyspy",
                    "--repeat", "0", "--warmup", "0", *options, "-o", str(out),
                    str(ROOT / "tests" / "workloads" / workload)],
                   cwd=folder, check=True, capture_output=True, timeout=120)
    report: dict[str, Any] = json.loads(out.read_text("utf-8"))
    return report


def test_the_compiler_s_waits_are_compiling_not_waiting() -> None:
    """The loop's main thread spent 3.45 s of 5.4 s inside torch.compile (py-spy --idle by
    hand, docs/compile.md), a third of it waiting for the C++ compiler: without the wait pass
    that third was "waiting" and compiling a third of the run."""
    from perfstack_plugins.pyspy.speedscope import time_budget
    from perfstack_plugins.pyspy.waits import read_waits

    main = _speedscope("profile.speedscope.json.gz")
    gil = _speedscope("gil.speedscope.json.gz")
    wait = _speedscope("wait.speedscope.json.gz")
    run = _recorded()
    waits = read_waits(wait, main, run["home"])
    assert waits is not None
    before, _ = time_budget(*main, *gil, run["wall_s"], run["unsampled_start_s"],
                            teardown_s=run["teardown_s"])
    after, _ = time_budget(*main, *gil, run["wall_s"], run["unsampled_start_s"],
                           teardown_s=run["teardown_s"], compile_share=waits.compile_share)
    was = {m.name: float(m.value or 0.0) for m in before}
    now = {m.name: float(m.value or 0.0) for m in after}
    assert was["budget.compile"] < 45 and was["budget.idle"] > 20  # the reading
    assert now["budget.compile"] > 55 and now["budget.idle"] < 10
    # only waiting moved, and no more of it than the wait pass saw inside the compiler
    for part in ("budget.startup", "budget.interpreter", "budget.native"):
        assert now[part] == pytest.approx(was[part])
    moved = now["budget.compile"] - was["budget.compile"]
    assert moved == pytest.approx(was["budget.idle"] - now["budget.idle"])
    # compiling is now the wait pass's share of the sampled time
    assert now["budget.compile"] <= 100 * waits.compile_share + 1e-9
    assert now["budget.compile"] == pytest.approx(100 * waits.compile_share, abs=8)
    assert sum(now.values()) == pytest.approx(100, abs=0.5)


def test_where_the_compiler_waited_is_named() -> None:
    """The wait pass less the main pass, per place: the compiler's longest wait is on the C++
    compiler it spawned (subprocess's Popen wait), inside torch.compile."""
    from perfstack_plugins.pyspy.waits import read_waits, wait_rows

    run = _recorded()
    waits = read_waits(_speedscope("wait.speedscope.json.gz"),
                       _speedscope("profile.speedscope.json.gz"), run["home"])
    assert waits is not None
    rows = wait_rows(waits, run["wall_s"])
    assert rows, "no place waited at"
    top = rows[0]
    assert top.attrs["kind"] == "wait" and top.attrs["in_compile"] is True
    assert top.attrs["function"].startswith("Popen.") and top.attrs["file"].endswith(
        "subprocess.py")
    seconds = [float(r.values["wait_time"].value or 0.0) for r in rows]
    assert seconds == sorted(seconds, reverse=True) and seconds[0] > 0.5
    assert all(float(r.values["wait_share"].value or 0.0) >= 2.0 for r in rows)


def test_the_compiler_s_own_imports_are_not_the_workload_s_late_imports() -> None:
    """torch.compile's first call imports the compiler: that is compiling (the budget's
    compile part), not a late import of the workload's to fix."""
    from perfstack_plugins.pyspy.speedscope import summarize

    run = _recorded()
    rows, _, _ = summarize(*_speedscope("profile.speedscope.json.gz"),
                           *_speedscope("gil.speedscope.json.gz"), run["home"])
    vias = [item.get("via") or {} for r in rows[next(iter(rows))]
            for item in r.attrs.get("late_imports") or []]
    assert not any(v.get("function") == "compile" and str(v.get("file", "")).endswith(
        "torch/__init__.py") for v in vias)


def test_generated_code_is_torch_s_not_the_workload_s() -> None:
    """inductor's generated modules live in its cache folder, outside any environment: they
    are torch.compile's code, folded apart, not the workload's own functions."""
    from perfstack.analysis.origin import GENERATED, origin

    where = origin("/tmp/torchinductor_root/nk/cnkjixrbgph.py", "/tmp/work")
    assert not where.ours and where.library == GENERATED
    assert where.path == "torchinductor_root/nk/cnkjixrbgph.py"


def test_a_waiting_main_thread_is_told_where_it_waits(tmp_path: Path) -> None:
    """A real run: the main thread waits on a socket in its own function; the waiting finding
    names that function, from the wait pass."""
    report = _pyspy_run(tmp_path, "waits_on_io.py")
    waits = [r for r in report["layers"]["python"] if r.get("attrs", {}).get("kind") == "wait"]
    assert waits and waits[0]["attrs"]["function"] == "fetch"
    assert waits[0]["values"]["wait_share"]["value"] > 50
    finding = next(f for f in report["findings"] if f["rule"] == "time.waiting")
    assert any(e.startswith("it waits in fetch (waits_on_io.py:") for e in finding["evidence"])


@pytest.mark.cpus(0)  # py-spy's 200 Hz wait sampler runs beside the loop, as a user's does
def test_a_loader_that_reads_is_loading_by_its_waits_too(tmp_path: Path) -> None:
    """Issue 72: a DataLoader-bound loop was named at 40-55% where its own timer said 55-85%:
    py-spy's running samples miss the loader's reads and sleeps. The wait pass's share of the
    main thread's working time agrees with the workload's own timer within 10 points.
    The loop lasts ~2 s: at the default 50 Hz its ~100 wait samples carry a sampling error
    of ~3.5 points (one run in a few hundred strays past 10); at 200 Hz, ~1.8 points, so the
    verdict is the code's, not the draw's (observed: within 2.3 points in 6 runs)."""
    report = _pyspy_run(tmp_path, "loader_sleeps.py", "--pyspy-wait-rate", "200")
    metrics = {m["name"]: m["value"] for m in report["metrics"]}
    # the workload's own timer, in the same run: "loader share 87.5% of the loop (...)"
    said = (tmp_path / ".perfstack" / "runs" / "latest" / "pyspy" / "stdout.log").read_text()
    truth = float(said.split("loader share ")[1].split("%")[0])
    assert abs(metrics["data_loading_time_share"] - truth) <= 10, (metrics, truth)
    assert metrics["data_loading_share"] < truth - 20  # the running samples alone: too low
    finding = next(f for f in report["findings"] if f["rule"] == "python.data-loading")
    assert "working time (waits included)" in finding["title"]


def test_the_compiler_s_modules_imported_are_importing_not_compiling() -> None:
    """tiny_mlp compiles nothing, yet its budget had "torch.compile 0.1%": SGD's constructor
    imports torch._dynamo, and py-spy sampled a function of convert_frame.py (named
    TODO_UNKNOWN) running as that module was imported. A compiler frame counts only outside
    any import; torch.compile's call importing the compiler is compiling."""
    from perfstack_plugins.pyspy.compiling import CompilerFrames

    site = "/v/lib/python3.11/site-packages/"
    frames = [{"name": "main", "file": "/w/train.py"},
              {"name": "_find_and_load", "file": "<frozen importlib._bootstrap>"},
              {"name": "<module>", "file": site + "torch/_dynamo/convert_frame.py"},
              {"name": "TODO_UNKNOWN", "file": site + "torch/_dynamo/convert_frame.py"},
              {"name": "compile", "file": site + "torch/__init__.py"},
              {"name": "_compile", "file": site + "torch/_dynamo/convert_frame.py"}]
    compiling = CompilerFrames(frames)
    assert not compiling([0, 1, 2, 3])  # importing the compiler's module
    assert compiling([0, 4, 1, 2])  # torch.compile(model) importing it
    assert compiling([0, 5])  # compiling a frame
    assert not compiling([0])
