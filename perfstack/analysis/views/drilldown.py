"""The drill-down: the workload's own functions first, then the libraries each folded into one
line, each with the torch ops it called and the kernels those ran; a function sampled in the
workload's child processes is labelled so and given no share of its wall time."""

from __future__ import annotations

from perfstack.analysis.origin import origin, short_key, workload_dir
from perfstack.analysis.primary import Primary
from perfstack.records import datarecord, field
from perfstack.report import Layer, Report, Row


@datarecord
class Node:
    """A line of the drill-down tree: numbers only; renderers word them."""

    key: str
    label: str  # the function with its short path, the op with its shapes, the kernel
    layer: str
    source: str
    seconds: float | None = None  # own time (functions, ops' self), or the kernel's time
    #: what ``seconds`` counts: "self", "own" (a function of the workload's with the library
    #: code it calls), "total" or "device"
    seconds_kind: str = "self"
    share: float | None = None  # % of the wall time of the run that measured it (functions)
    calls: int | None = None
    samples: int | None = None
    gil_share: float | None = None  # % of the function's samples holding the GIL
    #: an op's share of the roof it can reach (%) and what bounds it (docs/roofline.md)
    roof: float | None = None
    bound: str | None = None
    ours: bool = False  # the workload's own code
    library: str = ""  # the package a folded library row stands for
    #: the processes a function was sampled in, as its label starts: "" for the workload's
    #: own, "[2 child processes]" for its children's (their time beside the workload's)
    processes: str = ""
    #: the threads a function was sampled in: its share of the wall time is summed over them
    #: (four threads in one function fill 400% of it)
    threads: int = 1
    children: list[Node] = field(default_factory=list)


def child_words(processes: object) -> str:
    """'1 child process', '2 child processes'; 'child processes' when the count is unknown."""
    if not isinstance(processes, int) or isinstance(processes, bool):
        return "child processes"
    return f"{processes} child process" + ("" if processes == 1 else "es")


def _value(row: Row, name: str) -> float | None:
    q = row.values.get(name)
    return float(q.value) if q is not None and isinstance(q.value, (int, float)) else None


def _function_time(row: Row) -> float:
    """A function's time for the tree: its own time with the library code it calls counted
    in (``own_time``) for the workload's own functions, else its self time."""
    for name in ("own_time", "self_time"):
        value = _value(row, name)
        if value:
            return value
    return 0.0


def _function_rows(report: Report) -> list[Row]:
    """Python functions by their sampled time, without the ones that ran mostly inside an
    import (start-up, already a line of the budget): the work is what the tree is about."""
    rows = [r for r in report.layers.get(Layer.PYTHON, [])
            if r.attrs.get("kind") is None and ("self_time" in r.values or "own_time" in r.values)
            and float(r.attrs.get("import_share") or 0.0) < 50.0]
    rows.sort(key=lambda r: -_function_time(r))
    return [r for r in rows if _function_time(r) > 0
            and not str(r.attrs.get("file", "")).startswith("<frozen")]


def _split_key(key: str) -> tuple[str, str, str]:
    func, _, where = key.partition(" (")
    file, _, line = where.rstrip(")").rpartition(":")
    return func, file, line


def same_function(a: str, b: str) -> bool:
    """Whether two Python-layer keys 'func (file:line)' name the same function.

    Samplers differ in how they write the file: py-spy gives the path as the code object has
    it, torch's stack tracer strips the ``sys.path`` entry it found it under; and in how they
    name a nested function (qualified or not). The line tells same-named functions apart.
    """
    if a == b:
        return True
    fa, pa, la = _split_key(a)
    fb, pb, lb = _split_key(b)
    # py-spy names a nested function by its qualified name (main.<locals>.step), torch's stack
    # tracer by its own name (step)
    same_name = fa == fb or fa.endswith("." + fb) or fb.endswith("." + fa)
    if not same_name or la != lb or not pa or not pb:
        return False
    short, long = sorted((pa, pb), key=len)
    return long.endswith("/" + short)


def _ops_of(report: Report, key: str) -> list[Row]:
    ops = [r for r in report.layers.get(Layer.FRAMEWORK, [])
           if any(same_function(key, k) for k in r.links.get("python", []))]
    rank = Primary(report)
    ops.sort(key=lambda r: -rank.value(r))
    return ops


def _kernels_of(report: Report, op: Row) -> list[Row]:
    out = []
    for r in report.layers.get(Layer.KERNEL, []):
        if op.key in r.links.get("framework", []) or (
                r.attrs.get("kind") == "cpu-op-native" and r.source == op.source
                and r.key == op.attrs.get("op")):
            out.append(r)
    rank = Primary(report)
    out.sort(key=lambda r: -rank.value(r))
    return out


def _native_frames_of(report: Report, key: str) -> list[Row]:
    rows = [r for r in report.layers.get(Layer.KERNEL, [])
            if r.attrs.get("kind") == "native-frame"
            and any(same_function(key, k) for k in r.links.get("python", []))]
    rank = Primary(report)
    rows.sort(key=lambda r: -rank.value(r))
    return rows


def _run_wall(report: Report, source: str) -> float | None:
    backend = report.backend(source)
    return backend.wall_s if backend is not None and backend.wall_s else None


def function_node(report: Report, row: Row, home: str | None) -> Node:
    """Return a Python function as a drill-down node, its share of its run's wall time."""
    file = str(row.attrs.get("file") or "")
    where = origin(file, home)
    function = str(row.attrs.get("function") or row.name.split(" (")[0])
    line = row.attrs.get("line")
    label = short_key(function, file, line if isinstance(line, int) else None, home)
    wall = _run_wall(report, row.source)
    processes = ""
    if row.attrs.get("process") == "child":
        # Sampled in the workload's child processes (DataLoader workers, a pool): their time
        # runs beside the workload's, summed over them, and is no share of its wall time.
        processes = f"[{child_words(row.attrs.get('processes'))}]"
        label, wall = f"{processes} {label}", None
    if isinstance(rank := row.attrs.get("rank"), int) and row.key.startswith(f"rank{rank}:"):
        label = f"[rank {rank}] {label}"  # one of a job's ranks
    own = _value(row, "own_time")
    seconds = own if own else _value(row, "self_time")
    samples = _value(row, "own" if own else "self")
    return Node(row.key, label, "python", row.source, seconds, "own" if own else "self",
                100 * seconds / wall if seconds is not None and wall else None,
                samples=int(samples) if samples is not None else None,
                gil_share=_value(row, "gil_share"), ours=where.ours, library=where.library,
                processes=processes, threads=_threads(row))


def _threads(row: Row) -> int:
    found = row.attrs.get("threads")
    return max(1, len(found)) if isinstance(found, list) else 1


def _op_node(row: Row) -> Node:
    for name in ("total", "self", "device"):
        seconds = _value(row, name)
        if seconds is not None and row.values[name].unit == "s":
            break
    else:
        name, seconds = "self", None
    calls = _value(row, "calls")
    placed = row.attrs.get("roofline")
    bound = placed.get("bound") if isinstance(placed, dict) else None
    return Node(row.key, row.name, "framework", row.source, seconds, name,
                calls=int(calls) if calls is not None else None, roof=_value(row, "roof"),
                bound=bound if isinstance(bound, str) else None)


def _kernel_node(row: Row, op: Row | None = None) -> Node:
    # An op's native time is kept per op name, over all its shapes: say so, or the kernel
    # line would read as more time than the one shape above it.
    label = row.name
    if op is not None and row.attrs.get("kind") == "cpu-op-native" and op.name != row.name:
        label = f"{row.name} (all shapes)"
    for name in ("self", "time", "device", "total", "cpu_time"):
        seconds = _value(row, name)
        if seconds is not None and row.values[name].unit == "s":
            return Node(row.key, label, "kernel", row.source, seconds,
                        "device" if name == "device" else "self")
    samples = _value(row, "samples")
    return Node(row.key, label, "kernel", row.source,
                samples=int(samples) if samples is not None else None)


def _fold_libraries(nodes: list[Node]) -> list[Node]:
    """Each library's functions as one node (their self times summed), biggest first: the
    workload's own code leads and a library reads as one name, as pyinstrument shows it. The
    workload's child processes fold apart: their time is beside its own."""
    groups: dict[tuple[str, str], list[Node]] = {}
    for node in nodes:
        groups.setdefault((node.processes, node.library or "other"), []).append(node)
    def total(members: list[Node], attr: str) -> float | None:
        values = [getattr(n, attr) for n in members if getattr(n, attr) is not None]
        return sum(values) if values else None

    out = []
    for (processes, library), members in groups.items():
        samples = total(members, "samples")
        plural = "function" if len(members) == 1 else "functions"
        label = f"[{library}] {len(members)} {plural}"
        out.append(Node(f"child:library:{library}" if processes else f"library:{library}",
                        f"{processes} {label}" if processes else label, "python",
                        members[0].source, total(members, "seconds"), "self",
                        total(members, "share"),
                        samples=int(samples) if samples is not None else None,
                        library=library, processes=processes))
    out.sort(key=lambda n: -(n.seconds or 0.0))
    return out


def drill_down(report: Report, top: int = 5, depth: int = 3, all_frames: bool = False,
               children: int | None = None,
               kernels: int | None = None,
               advice: dict[str, list[str]] | None = None) -> tuple[list[Node], list[str]]:
    """Return the top Python functions, the workload's own first, each with the torch ops it
    called (depth 2) and the kernels those ops ran (depth 3), and notes on what could not be
    linked. Library functions come after the workload's own, folded into one node per library
    unless ``all_frames``. ``children`` (default ``top``) bounds the ops under a function,
    ``kernels`` (default ``children``) the kernels under an op; ``advice``, what the installed
    backends say to do when ops are not linked (``Backend.advice``'s ``"op-callers"``)."""
    advice = advice or {}
    kids = children or top
    per_op = kernels or kids
    notes: list[str] = []
    home = workload_dir(report)
    rows = _function_rows(report)
    nodes = [function_node(report, row, home) for row in rows]
    if not all_frames:
        nodes = [n for n in nodes if n.ours] + _fold_libraries([n for n in nodes if not n.ours])
    linked = any(r.links.get("python") for r in report.layers.get(Layer.FRAMEWORK, []))
    if depth >= 2 and report.layers.get(Layer.FRAMEWORK) and not linked:
        if report.run.analyzed is not None:  # recorded elsewhere: the fix is at recording
            notes.append("ops are not linked to Python functions: the traces hold no Python "
                         "stacks (torch.profiler records them with with_stack=True)")
        else:
            notes.append("ops are not linked to Python functions: " + "; ".join(
                advice.get("op-callers") or ["no installed backend records their callers"]))
    by_key = {r.key: r for r in rows}
    for node in nodes[:top]:
        if depth >= 2 and node.key in by_key:
            for op in _ops_of(report, node.key)[:kids]:
                child = _op_node(op)
                if depth >= 3:
                    child.children = [_kernel_node(k, op)
                                      for k in _kernels_of(report, op)[:per_op]]
                node.children.append(child)
            for frame in _native_frames_of(report, by_key[node.key].key)[:kids]:
                node.children.append(_kernel_node(frame))
    notes += _runs_meet(nodes[:top])
    return nodes[:top], notes


def _runs_meet(nodes: list[Node]) -> list[str]:
    """Where a function measured in one backend's run holds ops measured in another's, say
    so: the figures are of two runs, and an op's time is not a part of its function's."""
    pairs = sorted({(n.source, c.source) for n in nodes for c in n.children
                    if c.layer == Layer.FRAMEWORK.value and c.source != n.source})
    return [f"functions are timed in the {outer} run, the ops under them in the {inner} "
            "run: two runs of the workload (each its own process and profiler), so an op's "
            "time is not a part of its function's" for outer, inner in pairs]
