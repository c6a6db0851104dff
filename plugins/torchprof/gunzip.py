"""Reading a .gz trace with a bound on what it decompresses to.

A trace is a file people pass around: a small gzip that expands without end (one repeated
string) must be refused, not read for minutes.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import IO, Any, cast


class TraceError(Exception):
    """The file is not a Chrome trace with a traceEvents array."""


#: A gzip that grows past this many times its own size (and past GUNZIP_FLOOR) is not a
#: trace a profiler wrote: Kineto's JSON compresses 10-20x (the shared A100, V100 and MI250
#: traces: 13-19x); a 1 MB file of one repeated string decompressed to 1 GiB and was read for
#: five minutes.
GUNZIP_RATIO = 100
GUNZIP_FLOOR = 64 << 20


class _Bounded(io.BufferedIOBase):
    """A gzip file's decompressed bytes, stopped with TraceError past its bound."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.limit = max(GUNZIP_RATIO * path.stat().st_size, GUNZIP_FLOOR)
        self.inner = gzip.open(path, "rb")  # noqa: SIM115 - closed by close()
        self.count = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        data = self.inner.read(-1 if size is None else size)
        self.count += len(data)
        if self.count > self.limit:
            raise TraceError(
                f"{self.path}: decompresses to more than {GUNZIP_RATIO}x its size (over "
                f"{self.limit >> 20} MiB): not a trace a profiler wrote")
        return data

    read1 = read

    def close(self) -> None:
        self.inner.close()
        super().close()


def gunzip(path: Path, text: bool = False) -> IO[Any]:
    """Open a .gz trace for reading, bounded as ``_Bounded`` says (text: UTF-8, bad bytes
    replaced)."""
    raw = _Bounded(path)
    if text:
        return io.TextIOWrapper(cast(io.BufferedReader, raw), encoding="utf-8", errors="replace")
    return cast(IO[Any], raw)
