"""The op tree kept as columns against a plain nesting of objects, on random traces.

The torch reader keeps ops as arrays (``optree``) to bound its memory; here every figure it
derives from the nesting (calls, total and self time, allocations, the calling user frame,
the native time's top-level op) is checked against an independent, object-per-op nesting by
torch's rules, on traces with deep nests, ties, zero-length ops, a call whose only child is the
same op, events out of order and several threads.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from perfstack_plugins.torchprof.rows import summarize
from perfstack_plugins.torchprof.trace import TraceAggregate

from perfstack.report import Layer

NAMES = ["aten::add", "aten::mm", "aten::linear", "## block ##", "aten::copy_", "aten::t"]


class Node:
    """One op as an object, nested by the plain rules."""

    def __init__(self, name: str, ts: float, end: float) -> None:
        self.name, self.ts, self.end = name, ts, end
        self.children: list[Node] = []
        self.parent: Node | None = None
        self.alloc = 0.0
        self.frame: str | None = None


def _nest(nodes: list[Node]) -> list[Node]:
    """Sort by start (longest first); a node's parent is the innermost open node holding it."""
    nodes.sort(key=lambda n: (n.ts, -n.end))
    stack: list[Node] = []
    for node in nodes:
        while stack and stack[-1].end < node.end - 1e-3:
            stack.pop()
        if stack:
            node.parent = stack[-1]
            stack[-1].children.append(node)
        stack.append(node)
    return [n for n in nodes if n.parent is None]


def _merge(node: Node, merged: set[int]) -> None:
    """A call whose only child is the same op is one call: the child is folded in."""
    while len(node.children) == 1 and node.children[0].name == node.name:
        child = node.children[0]
        merged.add(id(child))
        node.children = child.children
        for grandchild in node.children:
            grandchild.parent = node
    for child in node.children:
        _merge(child, merged)


def _deepest(roots: list[Node], t: float) -> Node | None:
    starts = [r.ts for r in roots]
    k = max((i for i, s in enumerate(starts) if s <= t), default=-1)
    if k < 0 or not roots[k].ts <= t <= roots[k].end:
        return None
    node = roots[k]
    while True:
        inner = next((c for c in node.children if c.ts <= t <= c.end), None)
        if inner is None:
            return node
        node = inner


def reference(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Per op name: calls, total, self, allocations and calling frames; per native op: its
    own time and top-level ops; per frame: the top-level ops it called."""
    by_tid: dict[Any, list[Node]] = defaultdict(list)
    memory: dict[Any, list[tuple[float, float]]] = defaultdict(list)
    frames: dict[Any, list[tuple[float, float, str]]] = defaultdict(list)
    for e in events:
        if e["cat"] == "cpu_op":
            by_tid[e["tid"]].append(Node(e["name"], e["ts"], e["ts"] + e["dur"]))
        elif e["cat"] == "cpu_instant_event":
            memory[e["tid"]].append((e["ts"], e["args"]["Bytes"]))
        else:
            func, line = e["name"].split(": ")[1], e["name"].split("(")[1].split(")")[0]
            frames[e["tid"]].append((e["ts"], e["ts"] + e["dur"], f"{func} (user.py:{line})"))
    ops: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"calls": 0, "total": 0.0, "self": 0.0, "alloc": 0.0,
                 "callers": defaultdict(float)})
    native: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"calls": 0, "self": 0.0, "roots": defaultdict(float)})
    root_frames: dict[str, int] = defaultdict(int)
    for tid, nodes in by_tid.items():
        order = list(nodes)
        roots = _nest(order)
        merged: set[int] = set()
        for root in roots:
            _merge(root, merged)
        for t, size in memory[tid]:
            if size > 0:
                hit = _deepest(roots, t)
                if hit is not None:
                    hit.alloc += size
        tf = sorted(frames[tid], key=lambda f: (f[0], -f[1]))
        for node in order:  # the innermost frame holding the start, as the tracer stacks them
            open_frames = [f for f in tf if f[0] <= node.ts <= f[1]]
            node.frame = min(open_frames, key=lambda f: (-f[0], f[1]))[2] if open_frames \
                else None
        for node in order:
            if id(node) in merged:
                continue
            own = (node.end - node.ts) - sum(c.end - c.ts for c in node.children)
            entry = ops[node.name]
            entry["calls"] += 1
            entry["total"] += node.end - node.ts
            entry["self"] += own
            entry["alloc"] += node.alloc
            if node.frame is not None:
                entry["callers"][node.frame] += node.end - node.ts
                if node.parent is None:
                    root_frames[node.frame] += 1
            if "::" in node.name:
                top = node
                while top.parent is not None:
                    top = top.parent
                native[node.name]["calls"] += 1
                native[node.name]["self"] += own
                if top is not node:
                    native[node.name]["roots"][top.name] += own
    return {"ops": ops, "native": native, "frames": root_frames}


def _ops(rng: random.Random, tid: int, start: float, end: float, depth: int,
         out: list[dict[str, Any]], parent: str | None) -> None:
    """Random ops nested in [start, end): gaps, ties at the parent's start, zero lengths, and
    now and then an only child with its parent's name."""
    t = start
    while t < end and depth < 5:
        if parent is not None and rng.random() < 0.15 and t == start:
            name, length = parent, end - start  # the same op again, alone inside it
        else:
            name = rng.choice(NAMES)
            length = 0.0 if rng.random() < 0.05 else rng.uniform(0.001, (end - t))
        stop = min(t + length, end)
        ts, dur = round(t, 3), round(stop - t, 3)
        out.append({"ph": "X", "cat": "cpu_op", "name": name, "tid": tid, "pid": 1, "ts": ts,
                    "dur": dur, "args": {"External id": len(out) + 1}})
        if dur > 0.5:
            _ops(rng, tid, ts, ts + dur, depth + 1, out, name)
        if name == parent:
            return
        t = round(stop + (rng.uniform(0, 2) if rng.random() < 0.5 else 0), 3)


def _frames(rng: random.Random, tid: int, start: float, end: float, depth: int,
            out: list[dict[str, Any]]) -> None:
    t = start
    while t < end - 1 and depth < 3:
        length = rng.uniform(1, end - t)
        line = rng.randrange(1, 40)
        out.append({"ph": "X", "cat": "python_function", "name": f"user.py({line}): f{line}",
                    "tid": tid, "pid": 1, "ts": round(t, 3), "dur": round(length, 3)})
        _frames(rng, tid, round(t, 3), round(t + length, 3), depth + 1, out)
        t = round(t + length + rng.uniform(0, 5), 3)


def _trace(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    for tid in (7, 8):
        ops: list[dict[str, Any]] = []
        _ops(rng, tid, 1000.0, 1000.0 + rng.uniform(200, 600), 0, ops, None)
        events += ops
        _frames(rng, tid, 990.0, 1700.0, 0, events)
        for _ in range(60):
            events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]",
                           "tid": tid, "pid": 1, "ts": round(rng.uniform(990, 1700), 3),
                           "args": {"Bytes": rng.choice([-64, 128, 4096, 100000]),
                                    "Device Type": 0}})
    if seed % 2:
        rng.shuffle(events)  # the reader must not rely on the file's order
    return events


@pytest.mark.parametrize("seed", range(12))
def test_columns_nest_as_objects_do(seed: int, tmp_path: Path) -> None:
    events = _trace(seed)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    agg = TraceAggregate()
    agg.add_file(path)
    rows, _, _ = summarize(agg)
    want = reference(events)
    framework = rows[Layer.FRAMEWORK]
    assert len(framework) == len(want["ops"])
    for row in framework:
        expected = want["ops"][row.key]
        values = {k: q.value for k, q in row.values.items()}
        assert values["calls"] == expected["calls"], row.key
        assert values["total"] == pytest.approx(expected["total"] * 1e-6, rel=1e-9)
        assert values["self"] == pytest.approx(expected["self"] * 1e-6, rel=1e-9, abs=1e-15)
        assert values.get("self_alloc", 0.0) == expected["alloc"], row.key
        callers = sorted(expected["callers"].items(), key=lambda kv: -kv[1])[:5]
        assert row.links.get("python", []) == [k for k, _ in callers], row.key
    native = {r.key: r for r in rows[Layer.KERNEL]}
    assert set(native) == set(want["native"])
    for name, expected in want["native"].items():
        assert native[name].values["calls"].value == expected["calls"]
        assert native[name].values["self"].value == pytest.approx(expected["self"] * 1e-6,
                                                                  rel=1e-9, abs=1e-15)
        tops = sorted(expected["roots"].items(), key=lambda kv: -kv[1])[:5]
        assert native[name].links.get("framework", []) == [k for k, _ in tops], name
    called = {r.key: r.values["ops_called"].value for r in rows[Layer.PYTHON]}
    assert {k: v for k, v in called.items() if v} == dict(want["frames"])
