"""A trace's header: the keys Kineto writes before its ``traceEvents`` array (the rank's
``distributedInfo``, ``deviceProperties``...), read without reading the events.

Claiming a job's files (``perfstack analyze``) reads every rank's header, and splitting them
into ranks reads it again: it is read a few KB at a time and remembered until the job's
files are split. Nothing here imports the event reader (msgspec) or numpy.
"""

from __future__ import annotations

import functools
import json
import zlib
from pathlib import Path
from typing import IO, Any

from perfstack.report.job.canon import Canon

#: How much of a trace is read at a time while looking for its header's end.
HEADER_CHUNK = 1 << 14


def trace_header(path: Path, limit: int = 1 << 20) -> dict[str, Any] | None:
    """Return the keys a Chrome trace has before its ``traceEvents`` array ({} when none
    parse), or None when the first ``limit`` characters (bytes, of a gzip's JSON) hold no
    ``traceEvents`` key.

    Read a chunk at a time, up to the key (a trace's header is a few KB: reading the whole
    first MiB of each rank, three times, was a fifth of what ``analyze`` does outside its
    workers); asked again of the same file, unchanged, the answer is remembered."""
    try:
        info = path.stat()
    except OSError:
        return None
    found = _header_of(str(path), info.st_size, info.st_mtime_ns, limit)
    return dict(found) if found is not None else None


@functools.lru_cache(maxsize=4096)
def _header_of(path: str, size: int, mtime_ns: int, limit: int) -> dict[str, Any] | None:
    try:
        if path.endswith(".gz"):
            head = _gz_to_events(path, limit)
        else:
            with open(path, encoding="utf-8", errors="replace") as fh:
                head = _read_to_events(fh, limit)
    except (OSError, EOFError, zlib.error):
        return None
    key = head.find('"traceEvents"')
    if key < 0 or not head.lstrip().startswith("{"):
        return None
    # A job's ranks repeat their headers' facts (device properties...): held once here.
    return _SAME.facts(parse_header(head[:key]))  # (the whole too, where ranks' are equal)


_SAME = Canon()


def forget_headers() -> None:
    """Forget the headers remembered (``trace_header``), once a job's files are claimed."""
    _header_of.cache_clear()


#: The bytes read, and decompressed, at a time from a .gz trace while looking for its
#: header's end (a rank's header is a few KB; a KB of Kineto's JSON compresses to ~100 bytes).
GZ_CHUNK = 1 << 12


def _gz_to_events(path: str, limit: int) -> str:
    """A .gz trace's text up to its ``traceEvents`` key, at most ``limit`` bytes of it:
    decompressed a few KB at a time, without a gzip file and its text layer (claiming a
    job's thousands of ranks opens each). EOFError for a small file whose gzip stream is cut
    short (a rank cut off when its job ended: named where the job's files are listed)."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)  # (a gzip member's header and trailer)
    parts: list[bytes] = []
    got = 0
    ended = False  # the file's last bytes are read
    with open(path, "rb") as fh:
        while got < limit and not inflate.eof:
            raw = inflate.unconsumed_tail
            if not raw:
                raw = fh.read(GZ_CHUNK)
                ended = len(raw) < GZ_CHUNK
                if not raw:
                    break
            chunk = inflate.decompress(raw, min(GZ_CHUNK, limit - got))
            parts.append(chunk)
            got += len(chunk)
            if b'"traceEvents"' in b"".join(parts[-2:])[-len(chunk) - 16:]:
                break
    if ended:  # the whole file in hand: its stream must end in it (as a gzip reader says)
        while inflate.unconsumed_tail and not inflate.eof:
            inflate.decompress(inflate.unconsumed_tail, GZ_CHUNK)
        if not inflate.eof:
            raise EOFError(f"{path}: the gzip stream is cut short")
    return b"".join(parts).decode("utf-8", errors="replace")


def _read_to_events(fh: IO[str], limit: int) -> str:
    """A trace's text up to its ``traceEvents`` key (and a chunk past it), at most ``limit``
    characters."""
    head = ""
    while len(head) < limit:
        chunk = fh.read(min(HEADER_CHUNK, limit - len(head)))
        if not chunk:
            break
        head += chunk
        if '"traceEvents"' in head[-len(chunk) - 16:]:
            break
    return head


def parse_header(text: str) -> dict[str, Any]:
    """Parse the keys before ``traceEvents`` (``{"schemaVersion": 1, ...,``), or return {}."""
    text = text.strip().rstrip(",").strip()
    if not text.startswith("{"):
        return {}
    try:
        data = json.loads(text + "}") if text != "{" else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
