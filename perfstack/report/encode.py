"""A report as strict JSON: NaN and infinities made unknown (``finite``), compact, and written
a piece at a time (``report_pieces``). No I/O; ``perfstack.report.files`` writes it."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

from perfstack.report import SCHEMA_NAME, SCHEMA_VERSION, Layer, Report


def finite(data: Any) -> Any:
    """Return ``data`` with every NaN or infinite float replaced by None (unknown), so the JSON
    written is strict JSON that any reader accepts."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def strict_json(data: Any) -> tuple[Any, bytes]:
    """``data`` made finite (``finite``) and its JSON bytes. The C encoder refuses a NaN or
    an infinity itself: only then is the data walked in Python to replace them (a report of
    a thousand ranks is ~300,000 values, a tenth of a second to walk)."""
    try:
        return data, json_bytes(data)
    except ValueError:  # a NaN or an infinity: made unknown (None), then written
        data = finite(data)
        return data, json_bytes(data)


def json_bytes(data: Any) -> bytes:
    """Strict JSON (``data`` already finite), as perfstack writes it: compact, because only
    Python's C encoder is fast and it does not indent (an indented report took 4.4x as long to
    write and was 1.6x the size; ``perfstack show`` and ``jq`` are how a report is read)."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False).encode("utf-8")


#: How many rows or metrics ``report_pieces`` encodes at a time.
PIECE_ITEMS = 2000


#: Told each part of a report as it is encoded (``report_pieces``): where it goes (``"head"``:
#: the report without its rows, metrics and findings; ``"layers.NAME"``, ``"metrics"``,
#: ``"findings"``: some of those, in order) and its data, made finite.
PartSeen = Callable[[str, Any], None]


def _ignore(where: str, data: Any) -> None:
    """The default ``PartSeen``: nothing."""


def report_pieces(report: Report, seen: PartSeen = _ignore) -> Iterator[bytes]:
    """The report's JSON as ``save_report`` writes it, a piece at a time: the same bytes as
    encoding ``report.to_dict()`` whole, without holding the whole of it (a job of 4,096
    ranks is 27 MB of JSON, and its dict form several times that). ``seen`` is told each
    part's data as it is encoded (``save_report`` checks them against the schema)."""
    environment = report.environment
    recorded = environment.get("recorded")
    if not isinstance(recorded, dict) or len(recorded) <= PIECE_ITEMS:
        recorded = None  # (a job of many ranks: each rank's facts, written a piece at a time)
    head = {"schema": SCHEMA_NAME, "version": SCHEMA_VERSION, "run": report.run.to_dict(),
            "environment": environment if recorded is None else {**environment, "recorded": {}},
            "backends": [b.to_dict() for b in report.backends]}
    data, raw = strict_json(head)
    seen("head", data)
    if recorded is None:
        yield raw[:-1] + b',"layers":{'
    else:
        first = {k: head[k] for k in ("schema", "version", "run")}
        yield strict_json(first)[1][:-1] + b',"environment":{'
        for i, (key, value) in enumerate(environment.items()):
            yield (b"," if i else b"") + json_bytes(key) + b":"
            if key == "recorded":
                yield from _dict_pieces(recorded)
            else:
                yield strict_json(value)[1]
        yield b'},"backends":' + strict_json(head["backends"])[1] + b',"layers":{'
    for i, layer in enumerate(Layer):
        yield (b"," if i else b"") + json.dumps(layer.value).encode() + b":"
        yield from _list_pieces(report.layers[layer], f"layers.{layer.value}", seen)
    yield b'},"metrics":'
    yield from _list_pieces(report.metrics, "metrics", seen)
    yield b',"findings":'
    yield from _list_pieces(report.findings, "findings", seen)
    yield b"}"


def _dict_pieces(items: dict[str, Any]) -> Iterator[bytes]:
    """A JSON object of ``items``, PIECE_ITEMS entries at a time."""
    yield b"{"
    entries = list(items.items())
    for start in range(0, len(entries), PIECE_ITEMS):
        raw = strict_json(dict(entries[start:start + PIECE_ITEMS]))[1]
        yield (b"," if start else b"") + raw[1:-1]
    yield b"}"


def _list_pieces(items: list[Any], where: str, seen: PartSeen) -> Iterator[bytes]:
    """A JSON array of the items' ``to_dict()``, PIECE_ITEMS at a time."""
    yield b"["
    for start in range(0, len(items), PIECE_ITEMS):
        data, raw = strict_json([item.to_dict() for item in items[start:start + PIECE_ITEMS]])
        seen(where, data)
        yield (b"," if start else b"") + raw[1:-1]
    yield b"]"


def report_json(report: Report) -> str:
    """The report as the JSON text ``save_report`` writes (one line, newline-ended)."""
    return b"".join(report_pieces(report)).decode("utf-8") + "\n"


def utf8_safe(text: str) -> str:
    """``text`` as UTF-8 can hold it: the undecodable bytes Python keeps from a file name or an
    argument (``\udcff`` for a byte 0xff) written as ``\xff``, any other lone surrogate
    escaped; text without them is returned as it is."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
