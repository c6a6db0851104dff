"""Checking a report against its JSON Schema: the schema, a validator of it or of one of its
definitions (``schema_errors``), and the check of a report written a part at a time
(``PartCheck``). No report is read or written here."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

from perfstack.report import Layer


@cache
def schema() -> dict[str, Any]:
    """Return the report's JSON Schema (draft 2020-12)."""
    text = schema_bytes().decode("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def _validator(definition: str | None) -> Any:
    """A validator of the whole report, or of one of its definitions: jsonschema-rs (compiled,
    ~1 ms per thousand rows) when installed, else the pure-Python jsonschema."""
    full = schema()
    target = full if definition is None else {"$defs": full["$defs"],
                                              "$ref": f"#/$defs/{definition}"}
    try:
        import jsonschema_rs
    except ImportError:
        from jsonschema import Draft202012Validator  # lazy: only validation pays for it

        return Draft202012Validator(target)
    return jsonschema_rs.Draft202012Validator(target)


def schema_errors(data: Any, definition: str | None = None) -> list[str]:
    """Return the schema violations in ``data``, one readable line each (empty when valid).

    ``definition`` names a part of the schema (``"row"``, ``"metric"``, ``"finding"``) to
    check a single record against instead of a whole report.
    """
    validator = _validator(definition)
    if validator.is_valid(data):
        return []
    found = []
    for error in validator.iter_errors(data):
        path = list(getattr(error, "instance_path", None) or getattr(error, "absolute_path", []))
        found.append((path, f"{_where(path)}: {error.message}"))
    found.sort(key=lambda item: [(0, p) if isinstance(p, int) else (1, str(p))
                                 for p in item[0]])
    return [line for _, line in found]


def _where(path: Any) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return "report" + "".join(parts)


@cache
def schema_bytes() -> bytes:
    """The report schema's text, read from its package's folder (importlib.resources, with
    zipfile, only for an install that is not a folder)."""
    import importlib

    where = getattr(importlib.import_module("perfstack_schemas"), "__file__", None)
    if where is not None:
        return (Path(where).parent / "report.schema.json").read_bytes()
    from importlib import resources

    return (resources.files("perfstack_schemas") / "report.schema.json").read_bytes()


class PartCheck:
    """The parts of a report as they are written: each checked against the whole report's
    schema in a report of that part alone (the schema ties no part to another), and the
    written bytes' size and CRC (the fingerprint ``perfstack.report.files`` keeps of each
    report it wrote and checked)."""

    def __init__(self) -> None:
        """Nothing seen yet, all valid so far."""
        self.valid = True
        self.size = 0
        self.crc = 0
        self.empty: dict[str, Any] = {"layers": {layer.value: [] for layer in Layer},
                                      "metrics": [], "findings": []}
        self.head: dict[str, Any] = {}

    def seen(self, where: str, data: Any) -> None:
        """Check one part (``encode.PartSeen``)."""
        if not self.valid:
            return
        if where == "head":
            self.head = data
            whole = {**data, **self.empty}
        elif where.startswith("layers."):
            whole = {**self.head, **self.empty,
                     "layers": {**self.empty["layers"], where[len("layers."):]: data}}
        else:
            whole = {**self.head, **self.empty, where: data}
        self.valid = not schema_errors(whole)

    def pieces(self, pieces: Iterable[bytes]) -> Iterator[bytes]:
        """The pieces, counted as they pass."""
        for piece in pieces:
            self.size += len(piece)
            self.crc = zlib.crc32(piece, self.crc)
            yield piece
