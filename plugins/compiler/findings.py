"""What the compile layer tells a reader to do: graph breaks (each with its line, reason and
torch's own fix), recompiles (from a changing shape, or from a Python value), compiles that
fell back to eager. Functions of the report's compile rows and metrics."""

from __future__ import annotations

import os
from typing import Any

from perfstack.analysis.origin import origin, workload_dir
from perfstack.report import Finding, Layer, Report, Row

SOURCE = "dynamo"
#: Graph breaks or recompiled frames named in one finding's evidence.
SHOWN = 4


def _where(row: Row, home: str | None) -> str:
    file, line = str(row.attrs.get("file", "?")), row.attrs.get("line")
    path = origin(file, home).path if os.path.isabs(file) else file
    return f"{path}:{line}" if line else path


def _count(row: Row, name: str) -> int:
    q = row.values.get(name)
    return int(q.value) if q is not None and q.value is not None else 0


def _breaks(rows: list[Row], home: str | None) -> Finding | None:
    found = [r for r in rows if r.attrs.get("kind") == "graph-break"]
    if not found:
        return None
    evidence = []
    for r in found[:SHOWN]:
        hint = next(iter(r.attrs.get("hints") or []), None)
        evidence.append(f"{_where(r, home)} in {r.attrs.get('function')}: "
                        f"{r.attrs.get('reason')}" + (f" (torch: {hint})" if hint else ""))
    if len(found) > SHOWN:
        evidence.append(f"and {len(found) - SHOWN} more (the compile layer lists them)")
    one = len(found) == 1
    return Finding(
        "compile.graph-breaks",
        f"torch.compile breaks the graph at {len(found)} place{'' if one else 's'} in your code",
        Layer.COMPILE.value, "warning", evidence,
        "each break splits the compiled code in two and runs the code between eagerly: move "
        "the line out of the compiled function, or do as torch's hint says; "
        "torch.compile(fullgraph=True) stops at every break, to find them all",
        SOURCE)


def _reasons(row: Row) -> list[str]:
    return [str(r) for r in row.attrs.get("recompile_reasons") or []]


def _recompiles(rows: list[Row], home: str | None) -> Finding | None:
    frames = [r for r in rows if r.attrs.get("kind") == "frame" and _count(r, "recompiles")]
    if not frames:
        return None
    frames.sort(key=lambda r: -_count(r, "recompiles"))
    shapes = any("size mismatch" in x or "stride mismatch" in x for r in frames
                 for x in _reasons(r))
    evidence = []
    for r in frames[:SHOWN]:
        reason = _reasons(r)[0].split(": ", 1)[-1] if _reasons(r) else "?"
        seconds = r.values["compile_time"].value or 0.0
        evidence.append(f"{r.attrs.get('function')} ({_where(r, home)}) compiled "
                        f"{_count(r, 'compiles')} times, {seconds:.1f} s in all; first "
                        f"guard that failed: {reason}")
    if len(frames) > SHOWN:
        evidence.append(f"and {len(frames) - SHOWN} more frames that compiled again (the "
                        "compile layer lists them)")
    total = sum(_count(r, "recompiles") for r in frames)
    action = ("a dimension that changes between calls: mark it dynamic before the first "
              "call (torch._dynamo.mark_dynamic(x, 0)) or compile with dynamic=True, or pad "
              "the batch to a few fixed sizes" if shapes else
              "a guard on a Python value or an object failed: pass it as a tensor, or keep "
              "it constant between calls")
    over = f" over {len(frames)} frames" if len(frames) > 1 else ""
    return Finding("compile.recompiles",
                   f"torch.compile compiled again {total} time{'' if total == 1 else 's'}"
                   f"{over}",
                   Layer.COMPILE.value, "warning", evidence, action, SOURCE)


def _fallbacks(rows: list[Row], home: str | None) -> Finding | None:
    failed: list[tuple[Row, Any]] = [(r, r.attrs["failed"]) for r in rows
                                     if r.attrs.get("kind") == "frame" and r.attrs.get("failed")]
    if not failed:
        return None
    limit = any("recompile_limit" in str(x) or "cache_size_limit" in str(x)
                for _, fails in failed for x in fails)
    evidence = [f"{r.attrs.get('function')} ({_where(r, home)}): "
                f"{str(fails[0]).splitlines()[0][:200]}" for r, fails in failed[:SHOWN]]
    if len(failed) > SHOWN:
        evidence.append(f"and {len(failed) - SHOWN} more frames (the compile layer lists "
                        "them)")
    many = len(failed) > 1
    frames = f"{len(failed)} frames" if many else "a frame"
    return Finding(
        "compile.fallback",
        f"torch.compile gave up on {frames}" + (
            f" at {'their' if many else 'its'} recompile limit" if limit else "")
        + f": {'they run' if many else 'it runs'} eagerly, uncompiled",
        Layer.COMPILE.value, "critical", evidence,
        "the frame runs without the compiler from then on, silently: fix what made it "
        "recompile (torch._dynamo.config.recompile_limit only raises the limit)" if limit
        else "read the reason; TORCH_LOGS=graph_breaks,recompiles shows the compiler's own "
        "account",
        SOURCE)


def findings(report: Report) -> list[Finding]:
    """The compile layer's findings."""
    rows = [r for r in report.layers.get(Layer.COMPILE, []) if r.source == SOURCE]
    if not rows:
        return []
    home = workload_dir(report)
    return [f for f in (_fallbacks(rows, home), _breaks(rows, home), _recompiles(rows, home))
            if f is not None]
