"""The time budget and the drill-down: one picture of where the wall time goes.

Backends contribute by convention, so the core names none of them (docs/report-format.md):

- ``budget.<part>`` metrics (unit ``%``): a share of the wall time of the run that backend
  measured. ``startup``, ``interpreter``, ``native`` and ``idle`` partition the main thread's
  wall time; ``gil_wait`` (a thread that wants the GIL waits) and ``gpu_kernels`` (the device
  busy over the profiled steps) run in parallel with it and are shown beside.
- ``split.<part>`` metrics (unit ``%``): how CPU time outside the interpreter divides among
  ``framework`` (dispatch, bookkeeping), ``kernels`` (compute loops, BLAS, oneDNN), ``openmp``
  (the thread pool spinning or waiting), ``os``, ``runtime`` (libc, libstdc++) and ``other``.
  When present, the ``native`` share is divided in those proportions.

Shares come from one profiled run each; seconds are the share times the baseline's median wall
time, so every line says which backend measured it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfstack.report import Layer, Metric, Report, Row
from perfstack.units import fmt_seconds, fmt_value

#: part -> (title, layer), in the order the budget lists them.
PARTS: dict[str, tuple[str, str]] = {
    "startup": ("start-up and teardown: imports, interpreter", "python"),
    "interpreter": ("interpreter: Python code (GIL held)", "python"),
    "native": ("native code called from Python (GIL released)", "framework"),
    "framework": ("framework dispatch and bookkeeping", "framework"),
    "kernels": ("CPU kernels: BLAS, oneDNN, vectorized loops", "kernel"),
    "openmp": ("OpenMP pool: spinning, waiting", "kernel"),
    "os": ("OS kernel: syscalls, page faults", "kernel"),
    "runtime": ("C/C++ runtime: malloc, memcpy", "kernel"),
    "other": ("other native code", "kernel"),
    "idle": ("waiting: sleep, I/O, locks, device sync", "run"),
    "gil_wait": ("beside: a thread that wants the GIL waits", "python"),
    "gpu_kernels": ("beside: GPU kernels busy (profiled steps)", "kernel"),
}
#: Parts that add up to the main thread's wall time.
MAIN_PARTS = ("startup", "interpreter", "native", "idle")
SPLIT_PARTS = ("framework", "kernels", "openmp", "os", "runtime", "other")


@dataclass
class BudgetLine:
    """One line of the budget: a part of the wall time, who measured it, how."""

    part: str
    title: str
    layer: str
    share: float  # % of the wall time
    seconds: float | None  # share x the baseline's median wall time
    source: str
    depth: int = 0  # 1: a subdivision of the line above it


@dataclass
class Budget:
    """The time budget of a report; empty ``lines`` when no backend measured one."""

    wall_s: float | None
    lines: list[BudgetLine] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def share(self, part: str) -> float | None:
        """Return a part's share of the wall time (%), or None when it was not measured."""
        return next((ln.share for ln in self.lines if ln.part == part), None)


def _wall(report: Report) -> float | None:
    wall = next((m for m in report.metrics if m.name == "wall_time"), None)
    return float(wall.value) if wall is not None and wall.value is not None else None


def _by_prefix(report: Report, prefix: str) -> dict[str, Metric]:
    out: dict[str, Metric] = {}
    for m in report.metrics:
        if m.name.startswith(prefix) and m.value is not None and m.unit == "%":
            out.setdefault(m.name[len(prefix):], m)
    return out


def time_budget(report: Report) -> Budget:
    """Compose the budget from every backend's ``budget.*`` and ``split.*`` metrics."""
    wall = _wall(report)
    shares = _by_prefix(report, "budget.")
    split = _by_prefix(report, "split.")
    budget = Budget(wall)

    def line(part: str, share: float, source: str, depth: int = 0) -> None:
        title, layer = PARTS.get(part, (part, "run"))
        seconds = wall * share / 100 if wall is not None else None
        budget.lines.append(BudgetLine(part, title, layer, share, seconds, source, depth))

    for part in MAIN_PARTS:
        m = shares.get(part)
        if m is None:
            continue
        line(part, float(m.value or 0.0), m.source)
        if part == "native" and split:
            total = sum(float(split[p].value or 0.0) for p in split)
            for sub in [p for p in SPLIT_PARTS if p in split] + [
                    p for p in split if p not in SPLIT_PARTS]:
                value = float(split[sub].value or 0.0)
                if total and value:
                    line(sub, float(m.value or 0.0) * value / total,
                         f"{m.source} + {split[sub].source}", depth=1)
    for part in [p for p in shares if p not in MAIN_PARTS]:
        line(part, float(shares[part].value or 0.0), shares[part].source)
    if not any(ln.part in MAIN_PARTS for ln in budget.lines):
        if split:
            budget.notes.append("only the CPU-time split outside the interpreter was measured; "
                                "a Python sampler (pyspy) gives the wall-time budget")
            for sub, m in split.items():
                title, layer = PARTS.get(sub, (sub, "kernel"))
                budget.lines.append(BudgetLine(sub, f"{title} (% of native CPU time)", layer,
                                               float(m.value or 0.0), None, m.source))
        elif budget.lines:
            budget.notes.append("no backend split the main thread's wall time "
                                "(pyspy does)")
    elif "native" in shares and not split:
        budget.notes.append("native code is not split into framework and kernels: "
                            "perf record (perftop) does that")
    if budget.lines and wall is None:
        budget.notes.append("no baseline wall time: shares only")
    return budget


# --- drill-down -----------------------------------------------------------------------------

@dataclass
class Node:
    """A line of the drill-down tree."""

    label: str
    layer: str
    source: str
    figures: str  # the numbers, already in words
    children: list[Node] = field(default_factory=list)


def _time_value(row: Row) -> float:
    for name in ("self_time", "self", "time", "total", "samples", "share"):
        q = row.values.get(name)
        if q is not None and isinstance(q.value, (int, float)):
            return float(q.value)
    return 0.0


def _function_rows(report: Report) -> list[Row]:
    """Python functions by their own sampled time, without the ones that ran mostly inside an
    import (start-up, already a line of the budget): the work is what the tree is about."""
    rows = [r for r in report.layers.get(Layer.PYTHON, [])
            if r.attrs.get("kind") is None and "self_time" in r.values
            and float(r.attrs.get("import_share") or 0.0) < 50.0]
    rows.sort(key=lambda r: -_time_value(r))
    return [r for r in rows if _time_value(r) > 0
            and not str(r.attrs.get("file", "")).startswith("<frozen")]


def _split_key(key: str) -> tuple[str, str, str]:
    func, _, where = key.partition(" (")
    file, _, line = where.rstrip(")").rpartition(":")
    return func, file, line


def same_function(a: str, b: str) -> bool:
    """Whether two Python-layer keys 'func (file:line)' name the same function.

    Samplers differ in how they write the file: py-spy gives the path as the code object has
    it, torch's stack tracer strips the ``sys.path`` entry it found it under.
    """
    if a == b:
        return True
    fa, pa, la = _split_key(a)
    fb, pb, lb = _split_key(b)
    if fa != fb or la != lb or not pa or not pb:
        return False
    short, long = sorted((pa, pb), key=len)
    return long.endswith("/" + short)


def _ops_of(report: Report, key: str) -> list[Row]:
    ops = [r for r in report.layers.get(Layer.FRAMEWORK, [])
           if any(same_function(key, k) for k in r.links.get("python", []))]
    ops.sort(key=lambda r: -_time_value(r))
    return ops


def _kernels_of(report: Report, op: Row) -> list[Row]:
    out = []
    for r in report.layers.get(Layer.KERNEL, []):
        if op.key in r.links.get("framework", []) or (
                r.attrs.get("kind") == "cpu-op-native" and r.source == op.source
                and r.key == op.attrs.get("op")):
            out.append(r)
    out.sort(key=lambda r: -_time_value(r))
    return out


def _native_frames_of(report: Report, key: str) -> list[Row]:
    rows = [r for r in report.layers.get(Layer.KERNEL, [])
            if r.attrs.get("kind") == "native-frame"
            and any(same_function(key, k) for k in r.links.get("python", []))]
    rows.sort(key=lambda r: -_time_value(r))
    return rows


def _function_figures(row: Row) -> str:
    parts = []
    t, share = row.values.get("self_time"), row.values.get("self_share")
    if t is not None and t.value is not None:
        parts.append(fmt_seconds(float(t.value)))
    if share is not None and share.value is not None:
        parts.append(f"{share.value:.1f}% of samples")
    gil = row.values.get("gil_share")
    if gil is not None and gil.value is not None:
        where = ("interpreter" if gil.value >= 70 else "native code" if gil.value <= 30
                 else "mixed")
        parts.append(f"GIL held {gil.value:.0f}%: {where}")
    return ", ".join(parts)


def _op_figures(row: Row) -> str:
    parts = []
    for name in ("total", "self", "device"):
        q = row.values.get(name)
        if q is not None and q.value is not None and q.unit == "s":
            parts.append(f"{name} {fmt_seconds(float(q.value))}")
            break
    calls = row.values.get("calls")
    if calls is not None and calls.value is not None:
        parts.append(f"{int(calls.value)} calls")
    return ", ".join(parts) + " (profiled steps)"


def _kernel_figures(row: Row) -> str:
    for name in ("self", "time", "device", "total"):
        q = row.values.get(name)
        if q is not None and q.value is not None and q.unit == "s":
            return fmt_seconds(float(q.value))
    q = row.values.get("samples")
    return f"{int(q.value)} samples" if q is not None and q.value is not None else ""


def drill_down(report: Report, top: int = 5, depth: int = 3) -> tuple[list[Node], list[str]]:
    """Return the top Python functions, each with the torch ops it called (depth 2) and the
    kernels those ops ran (depth 3), and notes on what could not be linked."""
    notes: list[str] = []
    nodes = []
    functions = _function_rows(report)[:top]
    linked = any(r.links.get("python") for r in report.layers.get(Layer.FRAMEWORK, []))
    if depth >= 2 and report.layers.get(Layer.FRAMEWORK) and not linked:
        notes.append("ops are not linked to Python functions: run the torch backend with "
                     "--torch-stack to record the calling functions")
    for row in functions:
        node = Node(row.name, "python", row.source, _function_figures(row))
        if depth >= 2:
            for op in _ops_of(report, row.key)[:top]:
                child = Node(op.name, "framework", op.source, _op_figures(op))
                if depth >= 3:
                    child.children = [Node(k.name, "kernel", k.source, _kernel_figures(k))
                                      for k in _kernels_of(report, op)[:top]]
                node.children.append(child)
            for frame in _native_frames_of(report, row.key)[:top]:
                node.children.append(Node(frame.name, "kernel", frame.source,
                                          _kernel_figures(frame)))
        nodes.append(node)
    return nodes, notes


def hardware_beside(report: Report) -> list[str]:
    """The hardware picture next to the tree: CPU use, IPC, GPU utilisation and power."""
    out = []
    wanted = (("cpu_utilisation", "CPU use"), ("cpus_utilized", "CPUs busy"),
              ("ipc", "IPC"))
    seen = set()
    for name, title in wanted:
        m = next((x for x in report.metrics if x.name == name), None)
        if m is None or title in seen:
            continue
        seen.add(title)
        shown = fmt_value(m.value, m.unit) if m.value is not None else f"n/a ({m.reason})"
        out.append(f"{title} {shown} ({m.source})")
    if "IPC" not in seen:  # not derived: say why when the counter could not count
        row = next((r for r in report.layers.get(Layer.HARDWARE, [])
                    if r.key.endswith("instructions") and "value" in r.values
                    and r.values["value"].value is None), None)
        if row is not None:
            out.append(f"IPC n/a ({row.values['value'].reason}) ({row.source})")
    for m in report.metrics:
        if m.name.startswith("gpu") and m.name.endswith(("_util_gpu_mean", "_power_w_mean")):
            out.append(f"{m.name.removesuffix('_mean')} {fmt_value(m.value, m.unit)} "
                       f"({m.source})")
    return out
