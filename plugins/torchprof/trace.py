"""Compact records of torch.profiler's Chrome trace, aggregated per thread.

``TraceAggregate`` keeps only compact records of the events ``reader.TraceReader`` streams
(ops, Python frames and memory events as columns per thread; kernels and runtime calls),
aggregated when the file is done.

Ops are nested per thread the way torch's own ``EventList`` does it, so that counts and self
times agree with ``prof.key_averages()``: an event is a child of the innermost event on the same
thread that contains it, and a call whose only child is the same op counts once.
"""

from __future__ import annotations

import json
import re
from array import array
from pathlib import Path
from typing import Any

from perfstack.records import datarecord, field

from .busbytes import bus_bytes
from .header import trace_header
from .moduleranges import MODULE_PREFIX
from .optree import ThreadFrames, ThreadOps, Tree
from .reader import Args, Event, TraceReader, without_gc

__all__ = ["TraceAggregate", "TraceReader", "build_trees", "python_key", "trace_header",
           "without_gc"]

OP_CATEGORIES = ("cpu_op", "user_annotation")
KERNEL_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver", "runtime")
STEP_PREFIX = "ProfilerStep#"


def step_number(name: str) -> int | None:
    """The N of a profiler step range's name (``ProfilerStep#N``), or None."""
    tail = name[len(STEP_PREFIX):] if name.startswith(STEP_PREFIX) else ""
    return int(tail) if tail.isdigit() else None


def _bad_time(value: Any) -> bool:
    """A time that is NaN or infinite (``x - x`` is 0 for every finite number, NaN else)."""
    return type(value) is float and value - value != 0.0


@datarecord
class Kernel:
    """A device kernel (or memcpy/memset) and the ids that lead to the op that launched it.

    ``ext`` and ``correlation`` are id codes, unique across files (``TraceAggregate._id``)."""

    name: str
    ts: float
    dur: float
    cat: str
    ext: int
    correlation: int
    device: Any
    stream: Any
    group: str | None = None  # a collective kernel's process group, where the trace says
    moved: float | None = None  # a collective's bytes over each rank's links (busbytes)
    nbytes: int | None = None  # a memcpy's or memset's bytes, where the trace says


@datarecord
class RuntimeCall:
    """A CUDA/HIP runtime call (``cudaLaunchKernel``, ``hipMemcpyAsync``...) on a CPU thread:
    the link between a device event (same correlation id) and the op that made the call."""

    name: str
    ts: float
    end: float
    tid: str
    ext: int  # the External id's code (NO_ID: none)
    correlation: int  # the correlation id's code


#: Ids are kept as int codes: ``(file << 40) | id`` for the usual ids, a negative code from a
#: table for any other value, and ``NO_ID`` for none.
NO_ID = -1
_ID_BITS = 40


@datarecord
class TraceAggregate:
    """Compact records of one or more traces, ready to be turned into rows.

    Ops, frames and memory events are kept as columns per thread (``optree``): a 459 MB
    trace of 1.25 M ops holds ~70 MB of them. Device events and runtime calls are records."""

    ops: dict[str, ThreadOps] = field(default_factory=dict)  # by thread
    frames: dict[str, ThreadFrames] = field(default_factory=dict)
    #: nn.Module forward calls by thread (with_stack): start, end, and the id of the
    #: module's name (``Linear_1``) in ``module_names``
    modules: dict[str, ThreadFrames] = field(default_factory=dict)
    module_names: list[str] = field(default_factory=list)
    #: each forward-to-backward flow's two ends by id code: (thread, start µs)
    flow_starts: dict[int, tuple[str, float]] = field(default_factory=dict)
    flow_ends: dict[int, tuple[str, float]] = field(default_factory=dict)
    memory: dict[str, tuple[array[float], array[float]]] = field(default_factory=dict)
    kernels: list[Kernel] = field(default_factory=list)
    runtime: dict[int, RuntimeCall] = field(default_factory=dict)  # by correlation code
    events: int = 0
    truncated: list[str] = field(default_factory=list)
    #: events read only once the quotes in their names were escaped (see repair.py)
    repaired: int = 0
    #: events whose time or duration is NaN or infinite (left out, counted)
    nonfinite: int = 0
    #: each file's header (``distributedInfo``, ``deviceProperties``), in the order read
    headers: list[dict[str, Any]] = field(default_factory=list)
    #: op names by id (0: the empty name), the input shapes' key forms by id (0: none), the
    #: input types recorded with those shapes (None: the trace has none), and user frame
    #: keys by id. Two ids may share a key form (the same shapes in other types).
    names: list[str] = field(default_factory=lambda: [""])
    dims: list[str] = field(default_factory=lambda: [""])
    types: list[list[str] | None] = field(default_factory=lambda: [None])
    frame_keys: list[str] = field(default_factory=list)
    trees: dict[str, Tree] | None = None
    _file: int = 0
    _name_ids: dict[str, int] = field(default_factory=lambda: {"": 0})
    _dims_ids: dict[str, int] = field(default_factory=dict)
    _frame_ids: dict[str, int] = field(default_factory=dict)
    _module_ids: dict[str, int] = field(default_factory=dict)
    _odd_ids: dict[tuple[int, Any], int] = field(default_factory=dict)

    def add_file(self, path: Path) -> None:
        """Read one trace file into the aggregate."""
        if self.trees is not None:
            raise ValueError("the aggregate's trees are built: add every file before")
        reader = TraceReader(path)
        self._file = len(self.headers)
        with without_gc():
            for event in reader:
                if _bad_time(event.ts) or _bad_time(event.dur):
                    self.nonfinite += 1  # that event's problem, not the trace's
                    continue
                self.add(event)
        self.headers.append(reader.header)
        if reader.truncated:
            self.truncated.append(path.name)
        self.repaired += reader.repaired

    def _name_id(self, name: str) -> int:
        found = self._name_ids.get(name)
        if found is None:
            found = self._name_ids[name] = len(self.names)
            self.names.append(name)
        return found

    def _dims_id(self, dims: Any, types: Any) -> int:
        """The input shapes' (and types') id; the same few shapes recur in every step, so
        each is formatted once."""
        raw = f"{dims}{types}"
        found = self._dims_ids.get(raw)
        if found is None:
            found = self._dims_ids[raw] = len(self.dims)
            self.dims.append(json.dumps(dims, separators=(", ", ":")))
            self.types.append([str(t) for t in types] if isinstance(types, list) else None)
        return found

    def _id(self, value: Any) -> int:
        """Ids restart in every trace file: qualify them with the file, as an int code."""
        if value is None:
            return NO_ID
        if type(value) is int and 0 <= value < 1 << _ID_BITS:
            return (self._file << _ID_BITS) | value
        key = (self._file, value)
        code = self._odd_ids.get(key)
        if code is None:
            code = self._odd_ids[key] = -2 - len(self._odd_ids)
        return code

    def same_shapes_other_types(self, a: int, b: int) -> bool:
        """Whether two input-shape ids hold the same shapes in other types (autocast's
        redispatch of an op: see ``optree``)."""
        return a != b and self.dims[a] == self.dims[b] and self.types[a] != self.types[b]

    def step_ids(self) -> set[int]:
        """Return the name ids of profiler step ranges (``ProfilerStep#N``)."""
        return {i for i, name in enumerate(self.names) if name.startswith(STEP_PREFIX)}

    def step_starts(self) -> list[float]:
        """Return the start (µs) of every profiler step range, sorted."""
        steps = self.step_ids()
        columns = self.trees.values() if self.trees is not None else self.ops.values()
        return sorted(t for ops in columns for t, n in zip(ops.ts, ops.name, strict=True)
                      if n in steps)

    def add(self, ev: Event) -> None:
        """Keep what one event contributes."""
        self.events += 1
        cat = ev.cat
        if cat in OP_CATEGORIES and ev.ph == "X" and ev.ts is not None:
            args = ev.args or _NO_ARGS
            name = str(ev.name if ev.name is not None else "?")
            if cat == "user_annotation" and name.startswith(MODULE_PREFIX):
                # perfstack's own module ranges (moduleranges.py): calls, not ops
                _add_call(self.modules, self._module_ids, self.module_names,
                          name[len(MODULE_PREFIX):], ev)
                return
            tid = str(ev.tid)
            ops = self.ops.get(tid)
            if ops is None:
                ops = self.ops[tid] = ThreadOps()
            if "conv" in name and args.concrete_inputs is not None:
                ops.inputs[len(ops.ts)] = args.concrete_inputs
            ts = float(ev.ts)
            dims = args.input_dims
            ops.ts.append(ts)
            ops.end.append(ts + float(ev.dur or 0))
            ops.name.append(self._name_id(name))
            ops.dims.append(self._dims_id(dims, args.input_types) if dims else 0)
            ops.ext.append(self._id(args.external_id))
        elif cat == "python_function" and ev.ph == "X" and ev.ts is not None:
            raw = str(ev.name or "")
            if raw.startswith(MODULE_PREFIX):  # a module's forward call
                _add_call(self.modules, self._module_ids, self.module_names,
                          raw[len(MODULE_PREFIX):], ev)
            elif (key := python_key(raw)) is not None:  # a frame of the user's code
                _add_call(self.frames, self._frame_ids, self.frame_keys, key, ev)
        elif cat in KERNEL_CATEGORIES:
            args = ev.args or _NO_ARGS
            self.kernels.append(Kernel(
                str(ev.name if ev.name is not None else "?"), float(ev.ts or 0),
                float(ev.dur or 0), cat, self._id(args.external_id),
                self._id(args.correlation), args.device,
                args.stream if args.stream is not None else ev.tid,
                str(args.group) if args.group is not None else None,
                None if args.collective is None else bus_bytes(
                    args.collective, args.nelems_in, args.nelems_out, args.dtype,
                    args.group_size),
                args.nbytes if type(args.nbytes) is int and args.nbytes >= 0 else None))
        elif cat in RUNTIME_CATEGORIES:
            args = ev.args or _NO_ARGS
            if args.correlation is not None:
                ts = float(ev.ts or 0)
                call = RuntimeCall(str(ev.name or ""), ts, ts + float(ev.dur or 0),
                                   str(ev.tid), self._id(args.external_id),
                                   self._id(args.correlation))
                self.runtime[call.correlation] = call
        elif cat == "fwdbwd" and ev.ts is not None and ev.id is not None:
            end = (str(ev.tid), float(ev.ts))
            if ev.ph == "s":
                self.flow_starts[self._id(ev.id)] = end
            elif ev.ph == "f":
                self.flow_ends[self._id(ev.id)] = end
        elif cat == "cpu_instant_event" and ev.name == "[memory]" and ev.ts is not None:
            args = ev.args or _NO_ARGS
            if (args.device_type or 0) == 0:  # host memory; device memory stays with kernels
                tid = str(ev.tid)
                memory = self.memory.get(tid)
                if memory is None:
                    memory = self.memory[tid] = (array("d"), array("d"))
                memory[0].append(float(ev.ts))
                memory[1].append(float(args.size or 0))


def _add_call(columns: dict[str, ThreadFrames], ids: dict[str, int], names: list[str],
              name: str, ev: Event) -> None:
    """Append a Python call (a frame, a module's forward) to its thread's columns, its name
    as an id into ``names``."""
    tid = str(ev.tid)
    calls = columns.get(tid)
    if calls is None:
        calls = columns[tid] = ThreadFrames()
    found = ids.get(name)
    if found is None:
        found = ids[name] = len(names)
        names.append(name)
    ts = float(ev.ts)
    calls.ts.append(ts)
    calls.end.append(ts + float(ev.dur or 0))
    calls.key.append(found)


def build_trees(agg: TraceAggregate) -> dict[str, Tree]:
    """Nest each thread's ops as torch does (once; the columns read are then let go), with
    each op's allocations and user frame; return the trees by thread, in the order read."""
    if agg.trees is None:
        steps = agg.step_ids()
        trees: dict[str, Tree] = {}
        for tid in list(agg.ops):
            tree = trees[tid] = Tree(agg.ops.pop(tid), steps)
            tree.mark_redispatches(agg.same_shapes_other_types)
            if tid in agg.memory:
                tree.assign_memory(*agg.memory[tid])
            if tid in agg.frames:
                tree.assign_frames(agg.frames[tid])
        agg.trees = trees
    return agg.trees


_NO_ARGS = Args()


#: Frames of these files are torch's or perfstack's, not the user's code.
_NOT_USER = re.compile(r"(^|/)(torch|perfstack|runpy|importlib)/|<frozen |^<built-in")
_FRAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<func>.*)$")


def python_key(name: str) -> str | None:
    """Return 'func (file:line)' for a user-code frame name 'file(line): func', else None."""
    if _NOT_USER.search(name) or "site-packages/" in name:
        return None
    match = _FRAME.match(name)
    if match is None:
        return None
    return f"{match['func']} ({match['file']}:{match['line']})"
