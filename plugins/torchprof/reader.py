"""Reading torch.profiler's Chrome trace as a stream of events, never the whole file at once.

Traces of hundreds of MB are normal: ``TraceReader`` decodes the ``traceEvents`` array in
batches of about a MB (one event at a time where a batch will not decode) from a buffered
stream; ``trace.TraceAggregate`` keeps what it needs of each event.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from .gunzip import TraceError, gunzip
from .header import parse_header
from .repair import repaired_event

CHUNK = 1 << 20
#: No trace event is this large: a longer one is garbage (it would be held whole in memory).
MAX_EVENT = 64 << 20
#: What a JSON value can start with; anything else inside the array is not JSON.
_VALUE_STARTS = frozenset('{["-0123456789tfn')
_SKIP = re.compile(r"[\s,]*")


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
    input_types: Any = msgspec.field(name="Input type", default=None)
    concrete_inputs: Any = msgspec.field(name="Concrete Inputs", default=None)
    size: Any = msgspec.field(name="Bytes", default=None)
    nbytes: Any = msgspec.field(name="bytes", default=None)  # a memcpy's or memset's
    device_type: Any = msgspec.field(name="Device Type", default=None)
    # A collective kernel's process group (NCCL/RCCL kernels, Kineto from 2023).
    group: Any = msgspec.field(name="Process Group Name", default=None)
    # ... and its size: the collective, its message in elements, their type, the group's size
    collective: Any = msgspec.field(name="Collective name", default=None)
    nelems_in: Any = msgspec.field(name="In msg nelems", default=None)
    nelems_out: Any = msgspec.field(name="Out msg nelems", default=None)
    dtype: Any = None
    group_size: Any = msgspec.field(name="Group size", default=None)


class Event(msgspec.Struct):
    """One trace event, with only the fields perfstack reads."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    ts: Any = None
    dur: Any = None
    tid: Any = None
    id: Any = None  # a flow's id (``fwdbwd``: a forward op to its backward op)
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
                        self.header = parse_header(buf[:key].decode("utf-8", "replace"))
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
                    self.header = parse_header(buf[:key])
                    return buf, bracket + 1
            elif len(buf) > 64:
                buf = buf[-64:]
