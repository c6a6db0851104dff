"""What torch.compile did in one run, from the records dynamo kept (``compile.json``, written
by ``capture``): each compiled frame with its compiles, their time by phase and why each
recompile happened; each graph break with its reason and the user's line. Pure functions of
the file's data; nothing here imports torch.

Where the figures come from (dynamo's ``CompilationMetrics``, one per compile):

- a forward record per frame compiled (``co_name``, ``co_filename``, ``co_firstlineno``):
  ``entire_frame_compile_time_s`` is the whole compile of that frame (dynamo's tracing, then
  the backend); ``backend_compile_time_s`` the backend's part (AOTAutograd and the backend
  compiler); ``inductor_compile_time_s`` inductor's part of that, ``code_gen_time_s`` its
  code generation and ``triton_compile_time_us`` the kernels' build (C++ or Triton);
  ``recompile_reason`` the guard that failed when a frame compiled again;
- a backward record (``is_forward`` false) for each graph whose backward was compiled at its
  first backward call: ``duration_us``.

The compile time of a run is the forward records' frame compile times plus the backward
records' durations: what ``torch._dynamo.utils.compile_times()`` shows as
``_compile.compile_inner`` plus ``backward._backward_impl``.
"""

from __future__ import annotations

import re
from typing import Any

from perfstack.records import datarecord, field

#: A compile record's counts of graphs found in a cache (inductor's FX graph cache,
#: AOTAutograd's), local or remote: such a compile built nothing, and records no inductor time.
CACHE_HITS = ("inductor_fx_local_cache_hit_count", "inductor_fx_remote_cache_hit_count",
              "aotautograd_local_cache_hit_count", "aotautograd_remote_cache_hit_count")
#: A resume function dynamo makes after a graph break: ``torch_dynamo_resume_in_<fn>_at_<line>``.
RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<fn>.+)_at_(?P<line>\d+)$")


@datarecord
class Compile:
    """One compile of a frame: when, how long by phase, and why it happened."""

    compile_id: str
    start_s: float | None  # on the wall clock (epoch seconds)
    seconds: float  # the whole compile of the frame, its backward's compile included
    dynamo_s: float | None  # dynamo's own tracing (the whole less the backend's part)
    backend_s: float | None  # AOTAutograd and the backend compiler, the forward graph's
    inductor_s: float | None  # inductor's part of the backend's (forward and backward)
    codegen_s: float | None  # inductor's code generation (forward and backward)
    kernels_build_s: float | None  # the generated kernels' build: C++ or Triton
    backward_s: float | None  # the backward graph's compile, at its first backward call
    recompile_reason: str | None  # the guard that failed (None for a frame's first compile)
    graph_ops: int | None
    failed: str | None  # the compile failed and the frame ran eagerly: why
    installed: bool  # dynamo installed compiled code (False: it decided to run it eagerly)
    cached: bool = False  # inductor or AOTAutograd found the graph in a cache: nothing built


@datarecord
class Frame:
    """A user function that torch.compile compiled (or a resume function after a break)."""

    name: str
    file: str
    line: int
    compiles: list[Compile] = field(default_factory=list)
    #: dynamo's id of the code object (the N of compile id N/M): two functions of one name,
    #: file and line (made by exec from one source) are two frames
    frame_id: str | None = None

    @property
    def resumes(self) -> str | None:
        """For a resume function, the function whose graph break it continues after."""
        found = RESUME.match(self.name)
        return found.group("fn") if found else None

    @property
    def seconds(self) -> float:
        """Every compile of the frame, in seconds."""
        return sum(c.seconds for c in self.compiles)

    @property
    def recompiles(self) -> list[Compile]:
        """The compiles after the first (each has the guard that failed)."""
        return [c for c in self.compiles if c.recompile_reason]


@datarecord
class GraphBreak:
    """A graph break: where in the user's code, why, and how often dynamo met it compiling."""

    reason: str  # the first line of torch's reason
    detail: str  # torch's whole explanation, its hints included
    file: str
    line: int
    function: str
    met: int = 1  # compiles that met it (once per compile of the frame it is in)

    @property
    def hints(self) -> list[str]:
        """torch's own suggestions for this break ('Hint:' lines)."""
        return [ln.strip().removeprefix("Hint:").strip() for ln in self.detail.splitlines()
                if ln.strip().startswith("Hint:")]


@datarecord
class CompileRun:
    """Everything torch.compile did in one run of the workload."""

    frames: list[Frame]
    breaks: list[GraphBreak]
    torch: str | None = None
    unique_graphs: int | None = None
    #: the records torch kept were at its limit: the oldest compiles may be missing
    truncated: bool = False
    #: compiles that fell back to running eagerly, and why (the recompile limit among them)
    fallbacks: list[str] = field(default_factory=list)
    #: inductor's FX graph cache in this run: graphs found in it, and compiled afresh
    cache_hits: int = 0
    cache_misses: int = 0

    @property
    def seconds(self) -> float:
        """The run's compile time: every compile of every frame, backward graphs included."""
        return sum(f.seconds for f in self.frames)

    @property
    def compiles(self) -> list[Compile]:
        """Every compile, in the order they started."""
        return sorted((c for f in self.frames for c in f.compiles),
                      key=lambda c: (c.start_s is None, c.start_s or 0.0))

    @property
    def recompiles(self) -> int:
        """Compiles of a frame after its first."""
        return sum(len(f.recompiles) for f in self.frames)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def _us(value: Any) -> float | None:
    found = _num(value)
    return found / 1e6 if found is not None else None


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), text.strip())


def _user_frame(stack: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The innermost frame of the user's code in a graph break's stack (not torch's)."""
    own = [f for f in stack if "/torch/" not in str(f.get("file", "")).replace("\\", "/")]
    found = own or stack
    return found[-1] if found else None


def _breaks(data: dict[str, Any]) -> list[GraphBreak]:
    found: dict[tuple[str, str, int], GraphBreak] = {}
    for item in data.get("graph_breaks") or []:
        if not isinstance(item, dict) or not item.get("graph_break", True):
            continue
        frame = _user_frame([f for f in item.get("user_stack") or [] if isinstance(f, dict)])
        if frame is None:
            continue
        detail = str(item.get("reason") or "")
        key = (_first_line(detail), str(frame.get("file", "?")), int(frame.get("line") or 0))
        if key in found:
            found[key].met += 1
        else:
            found[key] = GraphBreak(key[0], detail, key[1], key[2], str(frame.get("name", "?")))
    return list(found.values())


def _compile(rec: dict[str, Any]) -> Compile:
    """One forward compile record as a ``Compile``."""
    whole = _num(rec.get("entire_frame_compile_time_s"))
    if whole is None:
        whole = _us(rec.get("duration_us")) or 0.0
    backend = _num(rec.get("backend_compile_time_s"))
    failed = rec.get("fail_reason") if rec.get("fail_type") else None
    return Compile(
        compile_id=str(rec.get("compile_id") or "?"),
        start_s=_us(rec.get("start_time_us")), seconds=whole,
        dynamo_s=whole - backend if backend is not None else None, backend_s=backend,
        inductor_s=_num(rec.get("inductor_compile_time_s")),
        codegen_s=_num(rec.get("code_gen_time_s")),
        kernels_build_s=_us(rec.get("triton_compile_time_us")), backward_s=None,
        recompile_reason=rec.get("recompile_reason") or None,
        graph_ops=rec.get("graph_op_count") if isinstance(rec.get("graph_op_count"), int)
        else None,
        failed=str(failed) if failed else None,
        installed=bool(rec.get("has_guarded_code", True)),
        cached=any(int(rec.get(f) or 0) > 0 for f in CACHE_HITS))


def read(data: dict[str, Any]) -> CompileRun:
    """Read one run's ``compile.json``; ValueError when it is not one."""
    records = data.get("records")
    if not isinstance(records, list):
        raise ValueError("not a compile record: no 'records' list")
    frames: dict[tuple[str, str, int, str], Frame] = {}
    by_id: dict[str, Compile] = {}
    backward: list[dict[str, Any]] = []
    fallbacks: list[str] = []
    # A compile that failed may name no frame (the recompile limit's: compile id 0/8, no
    # co_name): its frame is the one whose other compiles share its frame id (the 0 of 0/8).
    named = {str(r.get("compile_id", "")).split("/")[0]: (r["co_name"], r["co_filename"],
                                                           r.get("co_firstlineno"))
             for r in records if isinstance(r, dict) and isinstance(r.get("co_name"), str)
             and isinstance(r.get("co_filename"), str)}
    for rec in records:
        if not isinstance(rec, dict):
            continue
        if rec.get("is_forward") is False:
            backward.append(rec)
            continue
        name, file = rec.get("co_name"), rec.get("co_filename")
        if (not isinstance(name, str) or not isinstance(file, str)) and rec.get("fail_type"):
            frame_id = str(rec.get("compile_id", "")).split("/")[0]
            if frame_id in named:
                name, file, line = named[frame_id]
                rec = {**rec, "co_name": name, "co_filename": file, "co_firstlineno": line}
        if not isinstance(name, str) or not isinstance(file, str):
            continue
        one = _compile(rec)
        if one.failed:
            fallbacks.append(f"{name} ({file}:{rec.get('co_firstlineno')}): "
                             f"{_first_line(one.failed)}")
        where = (name, file, int(rec.get("co_firstlineno") or 0))
        code = one.compile_id.split("/")[0] if "/" in one.compile_id else None
        key = (*where, code or "")
        frames.setdefault(key, Frame(*where, frame_id=code)).compiles.append(one)
        by_id[one.compile_id] = one
    for rec in backward:
        seconds = _us(rec.get("backward_cumulative_compile_time_us"))
        if seconds is None:
            seconds = _us(rec.get("duration_us")) or 0.0
        owner = by_id.get(str(rec.get("compile_id")))
        if owner is None:
            continue
        owner.backward_s = (owner.backward_s or 0.0) + seconds
        owner.seconds += seconds
        for attr, field_name, scale in (("inductor_s", "inductor_compile_time_s", 1.0),
                                        ("codegen_s", "code_gen_time_s", 1.0),
                                        ("kernels_build_s", "triton_compile_time_us", 1e-6)):
            extra = _num(rec.get(field_name))
            if extra is not None:
                setattr(owner, attr, (getattr(owner, attr) or 0.0) + extra * scale)
    counters = data.get("counters") or {}
    stats = counters.get("stats") or {}
    inductor = counters.get("inductor") or {}
    limit = data.get("records_limit")
    return CompileRun(
        frames=list(frames.values()), breaks=_breaks(data),
        torch=data.get("torch") if isinstance(data.get("torch"), str) else None,
        unique_graphs=stats.get("unique_graphs") if isinstance(stats.get("unique_graphs"),
                                                               int) else None,
        truncated=isinstance(limit, int) and len(records) >= limit, fallbacks=fallbacks,
        cache_hits=int(inductor.get("fxgraph_cache_hit") or 0),
        cache_misses=int(inductor.get("fxgraph_cache_miss") or 0))


def torch_total(data: dict[str, Any]) -> float | None:
    """The compile time ``torch._dynamo.utils.compile_times()`` gives for the same run
    (``_compile.compile_inner`` plus ``backward._backward_impl``, summed), or None."""
    times = data.get("compile_times") or {}
    parts = [times.get("_compile.compile_inner"), times.get("backward._backward_impl")]
    found = [sum(float(x) for x in p) for p in parts if isinstance(p, list)]
    return sum(found) if found else None


def in_steps(run: CompileRun, first_mark_s: float | None,
             step_times: list[float]) -> list[float]:
    """The compile seconds that started in each step (step ``i`` is ``step_times[i]`` long,
    the first beginning at ``first_mark_s`` on the wall clock); [] without marks. A compile
    is placed, whole, in the step it started in."""
    if first_mark_s is None or not step_times:
        return []
    edges = [first_mark_s]
    for dt in step_times:
        edges.append(edges[-1] + dt)
    out = [0.0] * len(step_times)
    for c in run.compiles:
        if c.start_s is None or c.start_s < edges[0] or c.start_s >= edges[-1]:
            continue
        i = next(k for k in range(len(step_times)) if c.start_s < edges[k + 1])
        out[i] += c.seconds
    return out
