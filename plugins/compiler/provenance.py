"""Where inductor's generated kernels come from, as its compile records say (``compile.json``,
``capture``): for each kernel of a compiled graph, the user's source lines of the graph nodes
it fuses. Pure functions of the file's data; nothing here imports torch.

With ``torch._inductor.config.trace.provenance_tracking_level`` set (the torch backend's run
sets it: ``perfstack_plugins.torchprof.inductortrace``), each compile record holds
``inductor_provenance``: a set of JSON texts, each a mapping from ``"<kernel>:<handle>"``
(``extern_kernels.addmm:1``, ``cpp_fused_relu_0:2``, ``triton_poi_fused_mul_0:3``; the handle
counts the kernels in the order the generated code calls them) to a list of formatted user
stacks, one per source node the kernel fuses (``  File "train.py", line 7, in step\\n    h =
model(x)\\n``). A text may hold more than one graph (a forward with the backward compiled
with it, or a backward compiled after another's): it is one *candidate* sequence of kernels,
and the trace's graph calls are matched against them by their kernels' names
(``perfstack_plugins.torchprof.compiledlines``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from perfstack.records import datarecord, field

#: One frame of a formatted stack: its file, line and function, and the code line after it.
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[^\n]+)\n'
                    r'(?P<code>[^\n]*)', re.MULTILINE)


@datarecord
class Site:
    """A user's source line a kernel fuses: the innermost frame of one node's stack."""

    file: str
    line: int
    function: str
    code: str  # the source line as the stack shows it ('' where it does not)
    #: the frames around it, outermost first ('step (train.py:30)'), where the node's stack
    #: holds more than one
    callers: list[str] = field(default_factory=list)


@datarecord
class Entry:
    """One kernel of a compiled graph: its name as the generated code calls it, its handle,
    and the user's lines it fuses (several for a fused kernel; none where inductor knew
    none)."""

    kernel: str
    handle: int
    sites: list[Site]

    @property
    def match_name(self) -> str:
        """The kernel's name as a trace's range names it, reduced (``kernel_match_name``)."""
        return kernel_match_name(self.kernel)


@datarecord
class Candidate:
    """One provenance text of one compile record: kernels in the order of their handles."""

    compile_id: str
    forward: bool
    entries: list[Entry]
    order: int  # the record's place in the file (later compiles come later)


#: inductor's generated C++ kernel, as a profiler range names it: graph_<id>_cpp_fused_...
_GRAPH_PREFIX = re.compile(r"^graph_\d+_")


def kernel_match_name(name: str) -> str:
    """A kernel's name reduced to what a provenance key and a trace range share:
    ``extern_kernels.addmm`` and ``aten::addmm`` are ``addmm``; ``graph_0_cpp_fused_relu_0``
    and ``cpp_fused_relu_0`` are ``cpp_fused_relu_0``; an ATen fallback
    (``torch.ops.aten.mm.default``) is its op; a Triton kernel's name is itself."""
    name = _GRAPH_PREFIX.sub("", name.strip())
    if "::" in name:
        return name.rsplit("::", 1)[1]
    parts = name.split(".")
    if parts[0] == "extern_kernels":
        return parts[-1]
    if "aten" in parts[:-1]:
        return parts[parts.index("aten") + 1]
    return name


def sites(stacks: Any) -> list[Site]:
    """The user lines of a kernel's node stacks: each stack's innermost frame, once each, in
    the order given."""
    out: list[Site] = []
    seen: set[tuple[str, int]] = set()
    for stack in stacks if isinstance(stacks, list) else []:
        frames = list(_FRAME.finditer(str(stack)))
        if not frames:
            continue
        last = frames[-1]
        where = (last["file"], int(last["line"]))
        if where in seen:
            continue
        seen.add(where)
        out.append(Site(where[0], where[1], last["func"].strip(), last["code"].strip(),
                        [f"{f['func'].strip()} ({f['file']}:{f['line']})" for f in frames[:-1]]))
    return out


def _entries(text: str) -> list[Entry] | None:
    try:
        mapping = json.loads(text)
    except ValueError:
        return None
    if not isinstance(mapping, dict):
        return None
    out = []
    for key, stacks in mapping.items():
        kernel, _, handle = str(key).rpartition(":")
        if not kernel or not handle.isdigit():
            continue
        out.append(Entry(kernel, int(handle), sites(stacks)))
    out.sort(key=lambda e: e.handle)
    return out


def candidates(data: dict[str, Any]) -> list[Candidate]:
    """Every provenance text of every compile record in ``compile.json``'s data, in the
    records' order; [] where no record holds one (provenance was not asked for, or this torch
    does not record it)."""
    out: list[Candidate] = []
    records = data.get("records")
    for order, rec in enumerate(records if isinstance(records, list) else []):
        if not isinstance(rec, dict):
            continue
        texts = rec.get("inductor_provenance")
        if isinstance(texts, str):
            texts = [texts]
        for text in texts if isinstance(texts, list) else []:
            entries = _entries(str(text))
            if entries:
                out.append(Candidate(str(rec.get("compile_id") or "?"),
                                     rec.get("is_forward") is not False, entries, order))
    return out
