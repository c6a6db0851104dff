"""Reading torch.profiler's Chrome trace without holding it twice in memory.

Traces of hundreds of MB are normal, so the file is never loaded whole: ``TraceReader``
decodes the ``traceEvents`` array one event at a time from a buffered stream, and
``TraceAggregate`` keeps only compact records of the events it needs (ops, Python frames and
memory events as columns per thread; kernels and runtime calls), aggregated when the file is
done.

Ops are nested per thread the way torch's own ``EventList`` does it, so that counts and self
times agree with ``prof.key_averages()``: an event is a child of the innermost event on the same
thread that contains it, and a call whose only child is the same op counts once.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import json
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec

from .gunzip import TraceError, gunzip
from .optree import ThreadFrames, ThreadOps, Tree
from .repair import repaired_event

CHUNK = 1 << 20
#: No trace event is this large: a longer one is garbage (it would be held whole in memory).
MAX_EVENT = 64 << 20
#: What a JSON value can start with; anything else inside the array is not JSON.
_VALUE_STARTS = frozenset('{["-0123456789tfn')
_SKIP = re.compile(r"[\s,]*")
OP_CATEGORIES = ("cpu_op", "user_annotation")
KERNEL_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver", "runtime")
STEP_PREFIX = "ProfilerStep#"


@contextlib.contextmanager
def without_gc() -> Iterator[None]:
    """Run a block without the cyclic collector. The records of a trace are an acyclic heap
    that only grows while it is read and summarized: the collector would walk it again and
    again (it doubled the time of a 90 MB trace here) and find nothing to free."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class Args(msgspec.Struct):
    """The arguments of an event that perfstack reads; the others are skipped unparsed."""

    external_id: Any = msgspec.field(name="External id", default=None)
    correlation: Any = None
    device: Any = None
    stream: Any = None
    input_dims: Any = msgspec.field(name="Input Dims", default=None)
    concrete_inputs: Any = msgspec.field(name="Concrete Inputs", default=None)
    size: Any = msgspec.field(name="Bytes", default=None)
    device_type: Any = msgspec.field(name="Device Type", default=None)


class Event(msgspec.Struct):
    """One trace event, with only the fields perfstack reads."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    ts: Any = None
    dur: Any = None
    tid: Any = None
    args: Args | None = None


_BATCH = msgspec.json.Decoder(list[Event])
#: Between two events of the array: the end of one object and the start of the next.
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
#: How far back from the end of the buffer to look for the last boundary.
_TAIL = 1 << 20


def _event(obj: Any) -> Event | None:
    """An event decoded as a plain object, in the typed form (None: not an event)."""
    if not isinstance(obj, dict):
        return None
    try:
        return msgspec.convert(obj, Event, strict=False)
    except msgspec.ValidationError:  # odd args: keep the event without them
        try:
            return msgspec.convert({k: v for k, v in obj.items() if k != "args"}, Event,
                                   strict=False)
        except msgspec.ValidationError:
            return None


class _Slow(Exception):
    """The fast reader met what it cannot split safely: read the file the careful way."""


class TraceReader:
    """Iterate over the events of a Chrome trace (``.json`` or ``.json.gz``), streaming.

    Events are decoded in batches of about a MB by msgspec into typed structs that keep only
    the fields perfstack reads (the batch boundary is found between two events); a batch it
    cannot split or decode falls back to decoding event by event with the standard library.
    Memory stays bounded by the batch, not the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.truncated = False  # the file ended inside the array (a run killed mid-write)
        #: events Kineto wrote as invalid JSON (a quote in a name), read with it escaped
        self.repaired = 0
        self.bytes_read = 0
        #: the top-level keys written before the events (``distributedInfo``,
        #: ``deviceProperties``...), when they parse; filled once iteration starts
        self.header: dict[str, Any] = {}

    def __iter__(self) -> Iterator[Event]:
        done = 0
        try:
            for event in self._fast():
                done += 1
                yield event
        except _Slow:
            self.truncated = False
            self.repaired = 0
            for i, event in enumerate(self._careful()):
                if i >= done:
                    yield event

    # -- the fast path: bytes, batches ------------------------------------------------------

    def _open_bytes(self) -> IO[bytes]:
        if self.path.name.endswith(".gz"):
            return gunzip(self.path)
        return open(self.path, "rb")

    def _read_bytes(self, fh: IO[bytes]) -> bytes:
        try:
            chunk = fh.read(CHUNK)
        except EOFError:  # a .gz cut short (the run killed while writing): what came is kept
            self.truncated = True
            return b""
        self.bytes_read += len(chunk)
        return chunk

    def _fast(self) -> Iterator[Event]:
        with self._open_bytes() as fh:
            buf = b""
            while True:
                chunk = self._read_bytes(fh)
                if not chunk:
                    raise TraceError(f"{self.path}: no traceEvents array (not a Chrome trace)")
                buf += chunk
                key = buf.find(b'"traceEvents"')
                if key >= 0:
                    bracket = buf.find(b"[", key)
                    if bracket >= 0:
                        self.header = _header(buf[:key].decode("utf-8", "replace"))
                        buf = buf[bracket + 1:]
                        break
                elif len(buf) > 64:
                    buf = buf[-64:]
            eof = False
            while True:
                if not eof:
                    more = self._read_bytes(fh)
                    eof = not more
                    buf += more
                if eof:
                    yield from self._last(buf)
                    return
                cuts = list(_BOUNDARY.finditer(buf, max(0, len(buf) - _TAIL)))
                for cut in reversed(cuts[-5:]):
                    try:
                        events = _BATCH.decode(b"[" + buf[:cut.start() + 1] + b"]")
                    except (msgspec.DecodeError, msgspec.ValidationError):
                        continue
                    buf = buf[cut.end() - 1:]
                    yield from events
                    break
                else:
                    if len(cuts) or len(buf) > MAX_EVENT:
                        raise _Slow

    def _last(self, buf: bytes) -> Iterator[Event]:
        """The last events of the array, one by one, up to its closing bracket."""
        text = buf.decode("utf-8", "replace")
        decoder = json.JSONDecoder()
        pos = 0
        while True:
            pos = _SKIP.match(text, pos).end()  # type: ignore[union-attr]
            if pos >= len(text):
                self.truncated = True
                return
            if text[pos] == "]":
                return
            try:
                obj, pos = decoder.raw_decode(text, pos)
            except json.JSONDecodeError:
                repaired = repaired_event(text, pos)
                if repaired is not None:
                    obj, pos = repaired
                    self.repaired += 1
                elif text[pos] not in _VALUE_STARTS:
                    raise TraceError(f"{self.path}: not JSON inside traceEvents "
                                     f"({text[pos:pos + 20]!r}...)") from None
                else:
                    self.truncated = True  # the file ends inside this event: a run cut short
                    return
            event = _event(obj)
            if event is not None:
                yield event

    # -- the careful path: text, one event at a time -----------------------------------------

    def _open(self) -> IO[str]:
        if self.path.name.endswith(".gz"):
            return gunzip(self.path, text=True)
        return open(self.path, encoding="utf-8", errors="replace")

    def _careful(self) -> Iterator[Event]:
        decoder = json.JSONDecoder()
        with self._open() as fh:
            buf, pos = self._find_array(fh)
            eof = False
            while True:
                pos = _SKIP.match(buf, pos).end()  # type: ignore[union-attr]
                if pos >= len(buf):
                    if eof:
                        self.truncated = True
                        return
                    buf, pos, eof = self._more(fh, buf, pos)
                    continue
                if buf[pos] == "]":
                    return
                try:
                    obj, end = decoder.raw_decode(buf, pos)
                except json.JSONDecodeError:
                    repaired = repaired_event(buf, pos)
                    if repaired is None:
                        if buf[pos] not in _VALUE_STARTS:
                            raise TraceError(f"{self.path}: not JSON inside traceEvents "
                                             f"({buf[pos:pos + 20]!r}...)") from None
                        if eof:
                            self.truncated = True
                            return
                        if len(buf) - pos > MAX_EVENT:
                            raise TraceError(f"{self.path}: an event of over {MAX_EVENT >> 20} "
                                             "MiB inside traceEvents: not a trace event") from None
                        # Read until what is pending doubles: an event cut by the buffer's end
                        # is tried again O(log n) times, not once per chunk (quadratic in
                        # garbage).
                        buf, pos, eof = self._more(fh, buf, pos, len(buf) - pos)
                        continue
                    obj, end = repaired
                    self.repaired += 1
                pos = end
                event = _event(obj)
                if event is not None:
                    yield event
                if pos > CHUNK:
                    buf, pos = buf[pos:], 0

    def _read(self, fh: IO[str]) -> str:
        try:
            return fh.read(CHUNK)
        except EOFError:  # a .gz cut short (the run killed while writing): what came is kept
            self.truncated = True
            return ""

    def _more(self, fh: IO[str], buf: str, pos: int, at_least: int = 0) -> tuple[str, int, bool]:
        """What is left of ``buf`` after ``pos`` and at least ``at_least`` (and one chunk)
        more characters; whether the file ended."""
        parts, got = [buf[pos:]], 0
        while True:
            chunk = self._read(fh)
            parts.append(chunk)
            got += len(chunk)
            if not chunk or got >= at_least:
                return "".join(parts), 0, not chunk

    def _find_array(self, fh: IO[str]) -> tuple[str, int]:
        buf = ""
        while True:
            chunk = self._read(fh)
            if not chunk:
                raise TraceError(f"{self.path}: no traceEvents array (not a Chrome trace)")
            buf += chunk
            key = buf.find('"traceEvents"')
            if key >= 0:
                bracket = buf.find("[", key)
                if bracket >= 0:
                    self.header = _header(buf[:key])
                    return buf, bracket + 1
            elif len(buf) > 64:
                buf = buf[-64:]


def trace_header(path: Path, limit: int = 1 << 20) -> dict[str, Any] | None:
    """Return the keys a Chrome trace has before its ``traceEvents`` array ({} when none
    parse), or None when the first ``limit`` characters hold no ``traceEvents`` key."""
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
                head = fh.read(limit)
        else:
            with open(path, encoding="utf-8", errors="replace") as fh:
                head = fh.read(limit)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    key = head.find('"traceEvents"')
    if key < 0 or not head.lstrip().startswith("{"):
        return None
    return _header(head[:key])


def _header(text: str) -> dict[str, Any]:
    """Parse the keys before ``traceEvents`` (``{"schemaVersion": 1, ...,``), or return {}."""
    text = text.strip().rstrip(",").strip()
    if not text.startswith("{"):
        return {}
    try:
        data = json.loads(text + "}") if text != "{" else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


@dataclass
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


@dataclass
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


@dataclass
class TraceAggregate:
    """Compact records of one or more traces, ready to be turned into rows.

    Ops, frames and memory events are kept as columns per thread (``optree``): a 459 MB
    trace of 1.25 M ops holds ~70 MB of them. Device events and runtime calls are records."""

    ops: dict[str, ThreadOps] = field(default_factory=dict)  # by thread
    frames: dict[str, ThreadFrames] = field(default_factory=dict)
    memory: dict[str, tuple[array[float], array[float]]] = field(default_factory=dict)
    kernels: list[Kernel] = field(default_factory=list)
    runtime: dict[int, RuntimeCall] = field(default_factory=dict)  # by correlation code
    events: int = 0
    truncated: list[str] = field(default_factory=list)
    #: events read only once the quotes in their names were escaped (see repair.py)
    repaired: int = 0
    #: each file's header (``distributedInfo``, ``deviceProperties``), in the order read
    headers: list[dict[str, Any]] = field(default_factory=list)
    #: op names by id (0: the empty name), the input shapes' key forms by id (0: none), and
    #: user frame keys by id
    names: list[str] = field(default_factory=lambda: [""])
    dims: list[str] = field(default_factory=lambda: [""])
    frame_keys: list[str] = field(default_factory=list)
    trees: dict[str, Tree] | None = None
    _file: int = 0
    _name_ids: dict[str, int] = field(default_factory=lambda: {"": 0})
    _dims_ids: dict[str, int] = field(default_factory=dict)
    _frame_ids: dict[str, int] = field(default_factory=dict)
    _odd_ids: dict[tuple[int, Any], int] = field(default_factory=dict)

    def add_file(self, path: Path) -> None:
        """Read one trace file into the aggregate."""
        if self.trees is not None:
            raise ValueError("the aggregate's trees are built: add every file before")
        reader = TraceReader(path)
        self._file = len(self.headers)
        with without_gc():
            for event in reader:
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

    def _dims_id(self, dims: Any) -> int:
        """The input shapes' id; the same few shapes recur in every step, so each is
        formatted once."""
        raw = str(dims)
        found = self._dims_ids.get(raw)
        if found is None:
            found = self._dims_ids[raw] = len(self.dims)
            self.dims.append(json.dumps(dims, separators=(", ", ":")))
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
            ops.dims.append(self._dims_id(dims) if dims else 0)
            ops.ext.append(self._id(args.external_id))
        elif cat == "python_function" and ev.ph == "X" and ev.ts is not None:
            key = python_key(str(ev.name or ""))
            if key is not None:
                ts = float(ev.ts)
                tid = str(ev.tid)
                frames = self.frames.get(tid)
                if frames is None:
                    frames = self.frames[tid] = ThreadFrames()
                fid = self._frame_ids.get(key)
                if fid is None:
                    fid = self._frame_ids[key] = len(self.frame_keys)
                    self.frame_keys.append(key)
                frames.ts.append(ts)
                frames.end.append(ts + float(ev.dur or 0))
                frames.key.append(fid)
        elif cat in KERNEL_CATEGORIES:
            args = ev.args or _NO_ARGS
            self.kernels.append(Kernel(
                str(ev.name if ev.name is not None else "?"), float(ev.ts or 0),
                float(ev.dur or 0), cat, self._id(args.external_id),
                self._id(args.correlation), args.device,
                args.stream if args.stream is not None else ev.tid))
        elif cat in RUNTIME_CATEGORIES:
            args = ev.args or _NO_ARGS
            if args.correlation is not None:
                ts = float(ev.ts or 0)
                call = RuntimeCall(str(ev.name or ""), ts, ts + float(ev.dur or 0),
                                   str(ev.tid), self._id(args.external_id),
                                   self._id(args.correlation))
                self.runtime[call.correlation] = call
        elif cat == "cpu_instant_event" and ev.name == "[memory]" and ev.ts is not None:
            args = ev.args or _NO_ARGS
            if (args.device_type or 0) == 0:  # host memory; device memory stays with kernels
                tid = str(ev.tid)
                memory = self.memory.get(tid)
                if memory is None:
                    memory = self.memory[tid] = (array("d"), array("d"))
                memory[0].append(float(ev.ts))
                memory[1].append(float(args.size or 0))


def build_trees(agg: TraceAggregate) -> dict[str, Tree]:
    """Nest each thread's ops as torch does (once; the columns read are then let go), with
    each op's allocations and user frame; return the trees by thread, in the order read."""
    if agg.trees is None:
        steps = agg.step_ids()
        trees: dict[str, Tree] = {}
        for tid in list(agg.ops):
            tree = trees[tid] = Tree(agg.ops.pop(tid), steps)
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
