"""Reading a memray capture through memray's own reader API (``memray.FileReader``), never its
text output, into plain per-function figures.

Every allocation is charged to one Python function: the innermost frame of the workload's own
code on its stack, so that what a library allocates for the workload (torch's tensors, the
autograd engine's buffers) is charged to the workload's line that asked for it, as the time
drill-down folds libraries; an allocation with no frame of the workload's code goes to the
innermost library frame, and one with no Python frame at all to its thread. What a module
allocates while it is first imported (its code, its tables) is charged to that import
(``import torch._dynamo``), wherever the import was triggered. Functions are
keyed as the Python layer keys them, ``function (file:first line)``, so memory rows link to
time rows.
"""

from __future__ import annotations

import ast
import bisect
import functools
import itertools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from perfstack.analysis.origin import module_of, origin
from perfstack.records import datarecord, field

#: A Python frame as memray gives it: (function, file, line being run).
Frame = tuple[str, str, int]
#: memray's allocators that free memory (their records are not allocations).
_FREES = {1, 5, 15}  # PYMALLOC_FREE, FREE, MUNMAP
#: The frames that start the workload, not its own: the bootstrap (perfstack/run/bootstrap.py
#: in profiles recorded before it moved to perfstack/inprocess/) and runpy.
_STARTERS = ("perfstack/inprocess/bootstrap.py", "perfstack/run/bootstrap.py", "/runpy.py",
             "<frozen runpy>")
#: Frames of comprehensions: a frame of their own up to Python 3.11, inlined from 3.12.
_COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})
#: The import machinery's frames: what runs below them is a module being imported.
_IMPORTING = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")


@datarecord
class Site:
    """One function's memory over the run."""

    key: str
    function: str
    file: str
    line: int
    ours: bool  # the workload's own code (else a library's, or native code)
    at_peak: int = 0  # bytes it held at the peak of the heap
    at_peak_allocations: int = 0
    allocated: int = 0  # bytes it allocated over the run
    allocations: int = 0
    at_exit: int = 0  # bytes still allocated when tracking stopped
    temporary: int = 0  # allocations freed before the next allocation was made
    #: bytes it held just after each step ended, from the second step to the one before the
    #: last (the first holds the set-up; after the last the script may be ending)
    at_steps: list[int] = field(default_factory=list)


@datarecord
class Capture:
    """What one capture says, in plain numbers."""

    peak_heap: int  # bytes: the most the tracked allocations ever held at once
    peak_at_s: float | None  # seconds from the start of tracking to the peak
    duration_s: float
    allocations: int  # allocations made (frees not counted), as ``memray stats`` counts them
    allocated: int  # bytes they asked for
    temporary: int
    at_exit: int
    peak_rss: int | None  # the process's resident memory at its highest sampled point
    native: bool
    sites: dict[str, Site]
    #: per step (the second to the one before the last): the least the heap held from the
    #: end of the step before to just after its own end (its low point: a step's passing
    #: tensors do not count), and the resident memory just after it ended
    heap_at_steps: list[int] = field(default_factory=list)
    rss_at_steps: list[int] = field(default_factory=list)
    #: memray's memory snapshots in a step (the median over the steps read): under two, a
    #: step's low point is one snapshot caught wherever the step was
    snapshots_per_step: float = 0.0
    #: the step during which the peak happened (1-based, to the interval of memray's memory
    #: snapshots); None without steps or when it happened after the last step
    peak_step: int | None = None


@functools.cache
def _definitions(file: str) -> tuple[tuple[int, int, str], ...]:
    """Every function in a source file as (first line, last line, name), or () when the
    file cannot be read or parsed."""
    try:
        tree = ast.parse(Path(file).read_text("utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return ()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            out.append((first, node.end_lineno or node.lineno, node.name))
    return tuple(sorted(out))


def first_line(function: str, file: str, line: int) -> int:
    """The first line of the function running ``line`` (as py-spy's ``--function`` keys it:
    its ``def``, or its first decorator), or ``line`` itself when the source does not say."""
    best = None
    for start, end, name in _definitions(file):
        if name == function and start <= line <= end and (best is None or start > best):
            best = start
    if best is None:
        return line
    # py-spy keys a function by its code object's first line: the first decorator's, if any.
    return best


def charge(stack: Sequence[Frame], thread: str, home: str | None,
           ours: dict[str, bool] | None = None) -> tuple[str, str, str, int, bool]:
    """Return (key, function, file, line, ours) of the function an allocation is charged
    to, from its Python stack (innermost first). ``ours`` caches, per file, whether it is
    the workload's own code."""
    cache = {} if ours is None else ours

    def own(file: str) -> bool:
        found = cache.get(file)
        if found is None:
            found = cache[file] = origin(file, home).ours
        return found

    # Memory a module took while first imported is that import's: the outermost library
    # module being imported (a workload module that imports torch is torch's import).
    imported: str | None = None
    after_import = False
    for function, file, _ in reversed(stack):  # from the outside in
        if file in _IMPORTING:
            after_import = True
        elif after_import and function == "<module>":
            after_import = False
            if imported is None or own(imported):
                imported = file
    if imported is not None:
        name = _import_name(imported, home)
        return name, name, imported, 0, False
    mine: Frame | None = None
    library: Frame | None = None
    for function, file, line in stack:
        if file in _IMPORTING or file.endswith(_STARTERS) or function in _COMPREHENSIONS:
            continue  # a comprehension's memory is its function's (as from 3.12, PEP 709)
        if library is None:
            library = (function, file, line)
        if own(file):
            mine = (function, file, line)
            break
    found = mine or library
    if found is not None and mine is None and \
            origin(found[1], home).library == "perfstack":
        name = "[perfstack's bootstrap]"  # its machine-speed probe, around the script
        return name, name, "", 0, False
    if found is None:
        name = f"[native code, thread {thread or '?'}]"
        return name, name, "", 0, False
    function, file, line = found
    start = first_line(function, file, line)
    return f"{function} ({file}:{start})", function, file, start, mine is not None


@functools.cache
def _import_name(file: str, home: str | None) -> str:
    """'import torch._dynamo' for the module a file is."""
    return "import " + (module_of(file) or origin(file, home).path.removesuffix(".py"))


#: Native frames that only allocate (the allocators and their wrappers): an allocation with
#: no Python frame is named by the first native frame past them.
_ALLOCATING = re.compile(r"alloc|^mm_|^_?Py(Mem|Object)_|^operator new|^c10::", re.I)


def native_name(record: Any) -> str:
    """An allocation with no Python frame, named by its first native frame past the
    allocators ('[native] mkl_blas_avx512_sgemm_get_bufs'), else by its thread."""
    try:
        frames = record.native_stack_trace(max_stacks=24)
    except Exception:
        frames = []
    for function, _file, _line in frames:
        if function and not _ALLOCATING.search(function):
            return f"[native] {function.split('(')[0][:80]}"
    return f"[native code, thread {record.thread_name or record.tid}]"


class Charger:
    """Charges allocation records to sites, resolving each distinct stack once."""

    def __init__(self, home: str | None, native: bool = False) -> None:
        self.home = home
        self.native = native  # the capture holds native stacks
        self.sites: dict[str, Site] = {}
        self._by_stack: dict[int, Site] = {}
        self._ours: dict[str, bool] = {}

    def site(self, record: Any) -> Site:
        ident = int(record.stack_id)
        found = self._by_stack.get(ident)
        if found is None:
            key, function, file, line, ours = charge(record.stack_trace(),
                                                     str(record.thread_name or ""),
                                                     self.home, self._ours)
            if not file and key.startswith("[native code") and self.native:
                key = function = native_name(record)
            found = self.sites.get(key)
            if found is None:
                found = self.sites[key] = Site(key, function, file, line, ours)
            self._by_stack[ident] = found
        return found


def _snapshot_at(times_ms: list[int], t_ns: int) -> int:
    """The index of the first memory snapshot taken at or after ``t_ns`` (the last one when
    none was)."""
    return min(bisect.bisect_left(times_ms, t_ns // 1_000_000), max(len(times_ms) - 1, 0))


def read(path: Path, home: str | None, step_ends_ns: Iterable[int] = (),
         threshold: int = 1) -> Capture:
    """Read a memray capture. ``step_ends_ns`` are the wall-clock times (``time.time_ns()``)
    at which the workload's steps ended; ``threshold`` is memray's for a temporary allocation
    (freed within that many further allocations)."""
    import memray

    with memray.FileReader(str(path)) as reader:
        meta = reader.metadata
        charger = Charger(home, bool(meta.has_native_traces))
        for record in reader.get_high_watermark_allocation_records(merge_threads=True):
            site = charger.site(record)
            site.at_peak += record.size
            site.at_peak_allocations += record.n_allocations
        # Every allocation of the run, summed per stack first (a million records: the
        # tightest loop here), then charged per stack.
        totals: dict[int, list[int]] = {}
        examples: dict[int, Any] = {}
        for record in reader.get_allocation_records():
            if record.allocator in _FREES:
                continue
            stack = record.stack_id
            total = totals.get(stack)
            if total is None:
                totals[stack] = [record.size, 1]
                examples[stack] = record
            else:
                total[0] += record.size
                total[1] += 1
        for stack, (size, count) in totals.items():
            site = charger.site(examples[stack])
            site.allocated += size
            site.allocations += count
        at_exit = 0
        for record in reader.get_leaked_allocation_records(merge_threads=True):
            charger.site(record).at_exit += record.size
            at_exit += record.size
        temporary = 0
        for record in reader.get_temporary_allocation_records(merge_threads=True,
                                                              threshold=threshold):
            charger.site(record).temporary += record.n_allocations
            temporary += record.n_allocations
        snapshots = list(reader.get_memory_snapshots())
        times = [s.time for s in snapshots]
        all_ends = sorted(step_ends_ns)
        # The first step holds the set-up, and just after the last one the script may end:
        # neither is a step's growth.
        ends = all_ends[1:-1]
        at = [_snapshot_at(times, t) for t in ends] if snapshots else []
        if at:
            for record in reader.get_temporal_allocation_records(merge_threads=True):
                site = charger.site(record)
                if not site.at_steps:
                    site.at_steps = [0] * len(at)
                _add_live(site.at_steps, at, record.intervals)
    start_ms = meta.start_time.timestamp() * 1000
    peak_at_s = peak_step = None
    if snapshots:  # the snapshot that saw the most heap: the peak, to memray's interval
        peak_ms = max(snapshots, key=lambda snap: snap.heap).time
        peak_at_s = max(peak_ms - start_ms, 0.0) / 1000
        during = bisect.bisect_left(all_ends, int(peak_ms * 1_000_000))
        if during < len(all_ends):  # else before any step, or after the last one
            peak_step = during + 1
    return Capture(
        peak_heap=int(meta.peak_memory), peak_at_s=peak_at_s,
        duration_s=max((meta.end_time - meta.start_time).total_seconds(), 0.0),
        allocations=sum(t[1] for t in totals.values()),
        allocated=sum(t[0] for t in totals.values()), temporary=temporary, at_exit=at_exit,
        peak_rss=max((s.rss for s in snapshots), default=None), native=meta.has_native_traces,
        sites=charger.sites, heap_at_steps=_low_points(snapshots, at),
        snapshots_per_step=_per_step(at),
        rss_at_steps=[snapshots[i].rss for i in at], peak_step=peak_step)


def _per_step(at: list[int]) -> float:
    """The median count of memory snapshots between one step's end and the next's."""
    gaps = sorted(b - a for a, b in itertools.pairwise(at))
    return float(gaps[len(gaps) // 2]) if gaps else 0.0


def _low_points(snapshots: Sequence[Any], at: list[int]) -> list[int]:
    """Each step's low point: the least heap of the snapshots after the step before ended,
    up to the first one after its own end."""
    out = []
    for j, end in enumerate(at):
        start = at[j - 1] + 1 if j else end
        out.append(min(s.heap for s in snapshots[min(start, end):end + 1]))
    return out


def _add_live(live: list[int], at: list[int], intervals: Iterable[Any]) -> None:
    """Add to ``live[j]`` the bytes of the intervals alive at snapshot ``at[j]`` (allocated
    before it, freed after it or never)."""
    for interval in intervals:
        born = interval.allocated_before_snapshot
        died = interval.deallocated_before_snapshot
        first = bisect.bisect_left(at, born)
        last = len(at) if died is None else bisect.bisect_right(at, died - 1)
        for j in range(first, last):
            live[j] += interval.n_bytes
