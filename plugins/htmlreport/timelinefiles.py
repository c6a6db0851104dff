"""The Timeline's detail beside the page: the slices too short for the page, in files the page
reads only when a zoom would show them.

A page holds at most ``timeline.MAX_SLICES`` slices, the longest; the others go, a track at a
time and in time order, into chunks of :data:`CHUNK` slices, each a small script beside the
page (``<folder>/t<track>-<k>.js``) that hands its slices to the page when loaded: a page
opened from ``file://`` may load a script beside it, never fetch a file. A chunk's slices are
JSON (start and duration in µs, depth, own time, a name index into the chunk's own names),
gzip-compressed and in base64, which the page's browser inflates itself
(``DecompressionStream``). The page reads a chunk when the view is narrow enough for its
slices to be a pixel wide, and only the chunks of the tracks and the time in view.

Each file is written whole (to a temporary name, then renamed): a page never reads half a
chunk. The page without its folder is whole, less that detail.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Any

#: Slices a chunk holds.
CHUNK = 40_000


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, "utf-8")
    os.replace(tmp, path)


def pack(value: Any) -> str:
    """``value`` as the page carries the timeline's data and a chunk its slices: compact JSON,
    gzip-compressed (no timestamp in its header: the same data packs to the same text) and in
    base64, a fifth of the JSON's size for a timeline's numbers."""
    text = json.dumps(value, separators=(",", ":")).encode()
    return base64.b64encode(gzip.compress(text, 6, mtime=0)).decode()


def unpack(packed: str) -> Any:
    """The value :func:`pack` packed."""
    return json.loads(gzip.decompress(base64.b64decode(packed)))


def folder_name(data: dict[str, Any]) -> str:
    """The detail folder's name: the same for the same timeline (a page written again
    rewrites it), another for another report's beside it."""
    digest = hashlib.sha1(json.dumps([[t["name"], t["group"], len(t["ts"])]
                                      for t in data["tracks"]]).encode()).hexdigest()[:10]
    return f"timeline-{digest}"


def write_detail(data: dict[str, Any], page_dir: Path) -> int:
    """Write ``data``'s left-out slices (its ``detail``, popped) beside the page, each
    track's chunks named in its ``chunks`` as [start, end, file, count]; return how many
    slices were written."""
    detail: dict[int, list[tuple[float, float, int, float, str]]] = data.pop("detail", {})
    if not detail:
        return 0
    name = folder_name(data)
    folder = page_dir / name
    folder.mkdir(exist_ok=True)
    data["chunk_dir"] = name
    written = 0
    for index, slices in sorted(detail.items()):
        chunks = []
        for k in range(0, len(slices), CHUNK):
            part = slices[k:k + CHUNK]
            names: dict[str, int] = {}
            body = {"ts": [round(s[0], 3) for s in part], "dur": [round(s[1], 3) for s in part],
                    "depth": [s[2] for s in part], "own": [round(s[3], 3) for s in part],
                    "name_id": [names.setdefault(s[4], len(names)) for s in part],
                    "names": list(names)}
            packed = pack(body)
            file = f"t{index}-{k // CHUNK}.js"
            _write(folder / file,
                   f'window.perfstackTimelineChunk({index},{k // CHUNK},"{packed}");\n')
            chunks.append([part[0][0], max(s[0] + s[1] for s in part), file, len(part)])
            written += len(part)
        data["tracks"][index]["chunks"] = chunks
    return written
