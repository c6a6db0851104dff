"""Where a report goes: ``--format json``, ``-o -`` (standard output), and the merged Perfetto
timeline of recorded traces (gzip, several ranks), on real recorded GPU traces."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfstack.report.files import schema_errors
from tests.conftest import ROOT, WORKLOADS, Result, perfstack_in, two_rank_job

TRACE = ROOT / "tests" / "fixtures" / "gpu-traces" / "a100_nccl" / "rank-0.json.gz"


def _kernels(path: Path) -> int:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return sum(1 for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel")


def _processes(trace: dict[str, Any]) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == "process_name"}


def test_the_timeline_of_a_gzipped_trace_holds_its_events(
        perfstack: Callable[..., Result], tmp_path: Path) -> None:
    """It was an empty trace with exit 0: the reader called read_text() on the gzip."""
    result = perfstack("analyze", str(TRACE), "--format", "perfetto", "-o", "job.json")
    assert result.code == 0, result.stderr
    trace = json.loads(result.stdout)
    assert trace["metadata"]["backends"] == ["torch"]
    assert list(_processes(trace).values()) == ["torch run: torch.profiler: ops and kernels"]
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert len(kernels) == _kernels(TRACE) > 0
    # From its first event (µs on a clock of ~1e12 µs: equal to a nanosecond).
    assert abs(min(e["ts"] for e in trace["traceEvents"] if "ts" in e)) < 1e-2


def test_each_rank_is_its_own_process_on_one_clock(
        perfstack: Callable[..., Result], tmp_path: Path) -> None:
    def later(data: dict[str, Any]) -> None:  # rank 1's clock starts 5 ms later
        data["baseTimeNanoseconds"] = int(data.get("baseTimeNanoseconds", 0)) + 5_000_000

    job = two_rank_job(tmp_path / "job", later)
    result = perfstack("analyze", str(job), "--format", "perfetto", "-o", "job.json")
    assert result.code == 0, result.stderr
    trace = json.loads(result.stdout)
    names = _processes(trace)
    assert sorted(names.values()) == ["torch run, rank 0: torch.profiler: ops and kernels",
                                      "torch run, rank 1: torch.profiler: ops and kernels"]
    by_name = {n: p for p, n in names.items()}
    first = {rank: min(e["ts"] for e in trace["traceEvents"]
                       if e.get("pid") == by_name[f"torch run, rank {rank}: torch.profiler: "
                                                  "ops and kernels"] and "ts" in e)
             for rank in (0, 1)}
    assert abs(first[0]) < 1e-2 and abs(first[1] - 5000) < 1e-2  # rank 1 began 5 ms later
    for pid in names:
        kernels = sum(1 for e in trace["traceEvents"]
                      if e.get("pid") == pid and e.get("cat") == "kernel")
        assert kernels == _kernels(TRACE)


def test_dash_o_dash_prints_the_report_and_writes_no_file(
        perfstack: Callable[..., Result], tmp_path: Path) -> None:
    result = perfstack("analyze", str(TRACE), "-o", "-")
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout)  # nothing but the report on standard output
    assert schema_errors(report) == []
    assert report["run"]["analyzed"][0]["path"] == str(TRACE)
    assert not (tmp_path / "-").exists() and not (tmp_path / ".perfstack").exists()
    assert "report: standard output" in result.stderr
    page = perfstack("analyze", str(TRACE), "-o", "-", "--html", "page.html")
    assert page.code == 0 and (tmp_path / "page.html").stat().st_size > 0
    unnamed = perfstack("analyze", str(TRACE), "-o", "-", "--html")
    assert unnamed.code == 2 and unnamed.stdout == ""
    assert unnamed.stderr.count("\n") == 1 and "--html needs a file name" in unnamed.stderr


def test_format_json_is_the_report_file(perfstack: Callable[..., Result], tmp_path: Path) -> None:
    written = perfstack("analyze", str(TRACE), "-q", "-o", "job.json")
    assert written.code == 0, written.stderr
    shown = perfstack("show", "job.json", "--format", "json")
    assert shown.code == 0, shown.stderr
    assert json.loads(shown.stdout) == json.loads((tmp_path / "job.json").read_text())
    printed = perfstack("analyze", str(TRACE), "--format", "json", "-o", "again.json")
    assert json.loads(printed.stdout)["layers"] == json.loads(shown.stdout)["layers"]


def test_a_run_with_dash_o_dash_prints_json_and_keeps_its_folder(
        perfstack: Callable[..., Result], tmp_path: Path) -> None:
    result = perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0",
                       "-o", "-", str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed == result.report()  # the run folder's report.json, the same report
    assert not (tmp_path / "-").exists()


def test_an_analysed_report_read_from_another_folder_keeps_its_trace(tmp_path: Path) -> None:
    """``analyze`` given a path relative to where it ran, its report read from another folder:
    the Perfetto export was an empty trace, exit 0, no word (the artifact named the trace
    relative to the folder analyze ran in, and was read against the report's)."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(TRACE, work / "rank-0.json.gz")
    made = perfstack_in(work, "analyze", "rank-0.json.gz", "-o", str(tmp_path / "out" / "r.json"),
                        "-q")
    assert made.code == 0, made.stderr
    shown = perfstack_in(tmp_path, "show", "out/r.json", "--format", "perfetto", "-o", "t.json")
    assert shown.code == 0, shown.stderr
    trace = json.loads((tmp_path / "t.json").read_text())
    assert sum(1 for e in trace["traceEvents"] if e.get("cat") == "kernel") == _kernels(TRACE)
    assert trace["metadata"]["left_out"] == [] and "left out" not in shown.stderr


def test_artifacts_that_cannot_be_read_are_said_and_never_block(tmp_path: Path) -> None:
    """A report's artifacts are read whole: one naming /dev/zero was read until MemoryError, a
    FIFO blocked for ever, a 3 GiB file took 3.1 GB. Only regular files within the bound are
    read; each one left out is said on stderr, an empty trace too, and the page still renders
    (saying why it has no flame graph)."""
    made = perfstack_in(tmp_path, "analyze", str(TRACE), "-o", "r.json", "-q")
    assert made.code == 0, made.stderr
    os.mkfifo(tmp_path / "fifo")
    with open(tmp_path / "huge.json", "wb") as fh:  # sparse: no disk, 600 MiB to a reader
        fh.truncate(600 << 20)
    report = json.loads((tmp_path / "r.json").read_text())
    report["backends"][0]["artifacts"] = {"trace": "/dev/zero", "trace.rank1": "fifo",
                                          "trace.rank2": "huge.json", "trace.rank3": "gone"}
    report["backends"].append({**report["backends"][0], "name": "pyspy",
                               "artifacts": {"speedscope": "huge.json"}})
    (tmp_path / "hostile.json").write_text(json.dumps(report))
    shown = perfstack_in(tmp_path, "show", "hostile.json", "--format", "perfetto", "-o", "t.json",
                         timeout=60)
    # a trace of no events is no answer (issue 70): each artifact left out is said, then one
    # error line, exit 3, nothing written
    assert shown.code == 3, shown.stderr
    assert not (tmp_path / "t.json").exists()
    said = shown.stderr
    assert "/dev/zero: not a regular file" in said and "fifo: not a regular file" in said
    assert "huge.json: 600 MiB, over the 512 MiB" in said and "gone: gone" in said
    assert said.strip().splitlines()[-1].startswith(
        "perfstack: error: the trace would hold no events: none of the report's 5 artifact(s)")
    page = perfstack_in(tmp_path, "show", "hostile.json", "--format", "html", "-o", "p.html",
                        timeout=60)
    assert page.code == 0, page.stderr
    assert "600 MiB, over the 512 MiB read for a page" in (tmp_path / "p.html").read_text()
