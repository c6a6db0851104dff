"""The out-of-memory post-mortem: a run that died of memory, said as such, at its line.

A run died of memory when it raised ``MemoryError`` (an address-space limit, ``ulimit -v``,
or an allocation the machine refused) or when the kernel's OOM killer ended it (SIGKILL
while its memory cgroup's OOM-kill count rose; where the machine does not count them, SIGKILL
with its last resident memory within :data:`NEAR_LIMIT` of a limit). What it knew of its
memory is in its run record (``RunRecord.memory``: the in-process watch's last high, where
the main thread was then, its memory after each step, its limits). The finding names the
line (the MemoryError's raise site, else the watch's last high), what held the memory at the
end, whether it rose step over step (a leak) or in one allocation, and the fix that fits.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from perfstack.analysis.origin import origin
from perfstack.analysis.rules.cudaoom import evidence_and_action, fragmented, parse
from perfstack.report import Finding, Layer, Report, Row, RunRecord
from perfstack.report.units import fmt_value

RULE = "run.out-of-memory"
#: A SIGKILLed run whose last high is this close to a limit died of memory, where the
#: machine does not count OOM kills.
NEAR_LIMIT = 0.9
#: Resident memory after each step rising this much on average, step over step, over at
#: least :data:`RISING_STEPS` steps, is a floor that rises: a leak.
RISING_BYTES = 1 << 20
RISING_STEPS = 3
#: torch's CPU allocator refusing an allocation (a RuntimeError: "[enforce fail at
#: alloc_cpu.cpp:127] ... DefaultCPUAllocator: can't allocate memory: you tried to allocate
#: 536870912 bytes. Error code 12 (Cannot allocate memory)"; older torch: "not enough memory").
_CPU_ALLOCATOR = re.compile(r"DefaultCPUAllocator: .*?you tried to allocate (\d+) bytes")
#: The names of the limits, as the finding says them.
LIMIT_WORDS = {"cgroup": "its memory cgroup's limit", "address_space": "its address-space "
               "limit (ulimit -v)", "machine": "the machine's memory"}


def _bytes(n: float) -> str:
    return fmt_value(float(n), "B")


def _where(memory: dict[str, Any], home: str | None) -> str | None:
    """``file:line in function`` of the innermost frame of the workload's own code in the
    stack at the last high (else the innermost frame)."""
    stack = memory.get("stack") or []
    if not stack:
        return None
    ours = [f for f in stack if origin(str(f[0]), home).ours]
    file, line, func = (ours or stack)[0]
    return f"{file}:{line} in {func}"


def died_of_memory(record: RunRecord) -> str | None:
    """How ``record``'s run died of memory ('MemoryError': Python's, or torch's CPU allocator
    refusing an allocation; 'the OOM killer'; 'the device'), or None."""
    tail = (record.stderr_tail or "").strip().splitlines()
    if record.exit.status == "exited" and tail and (
            tail[-1].startswith("MemoryError") or _CPU_ALLOCATOR.search(tail[-1])):
        return "MemoryError"
    if record.exit.status == "exited" and tail and "OutOfMemoryError" in tail[-1] \
            and parse(tail[-1]) is not None:
        return "the device"
    memory = record.memory or {}
    if record.exit.status != "signalled" or record.exit.signal_name != "SIGKILL":
        return None
    if memory.get("oom_killed"):
        return "the OOM killer"
    peak, limits = memory.get("peak_rss_bytes"), memory.get("limits") or {}
    if memory.get("oom_killed") is None and isinstance(peak, int) and any(
            peak >= NEAR_LIMIT * v for k, v in limits.items() if k != "address_space"):
        return "the OOM killer"
    return None


def _rise(steps: list[int]) -> float | None:
    """The resident memory's mean rise a step, where it rose step over step (a floor
    that rises), else None."""
    if len(steps) < RISING_STEPS + 1:
        return None
    deltas = [b - a for a, b in itertools.pairwise(steps)]
    mean = sum(deltas) / len(deltas)
    rising = sum(1 for d in deltas if d > 0) >= 0.8 * len(deltas)
    return mean if rising and mean >= RISING_BYTES else None


def _naming(profilers: list[str], which: str) -> str:
    """'; perfstack run --plugins X names the allocations ...', for a backend of this run
    that measures the memory layer, else where to find one."""
    return (f"; perfstack run --plugins {profilers[0]} names the allocations {which}"
            if profilers else f"; a run with a backend of the memory layer ('perfstack "
            f"plugins' lists them) names the allocations {which}")


def holders(report: Report, top: int = 3,
            when: str = "at_peak") -> tuple[list[tuple[str, float]], str | None]:
    """What held the most memory at the peak a memory backend measured (its rows'
    ``at_peak``; ``when`` "at_oom": the instant a device ran out, torch's allocator snapshot
    then), and which backend measured it: the function and line, by bytes."""
    rows = [r for r in report.layers.get(Layer.MEMORY, [])
            if (q := r.values.get(when)) is not None and isinstance(q.value, (int, float))
            and q.value > 0 and r.attrs.get("kind") not in KINDS]
    if not rows:
        return [], None
    source = max(rows, key=lambda r: r.values[when].value or 0).source
    mine = sorted((r for r in rows if r.source == source),
                  key=lambda r: -(r.values[when].value or 0))[:top]
    return [(r.key, float(r.values[when].value or 0)) for r in mine], source


#: How the finding's lines of what held the memory begin (the answer quotes the first there is).
HELD_AT_OOM = "what held it the instant it ran out: "
BY_KIND = "the tensors then, by kind: "
HELD_AT_PEAK = "what held the most at its peak: "
HELD_LINES = (HELD_AT_OOM, BY_KIND, HELD_AT_PEAK)
NOT_RECORDED = "not recorded"


def held_line(found: Finding) -> str | None:
    """The out-of-memory finding's first line that says what held the memory (by line the
    instant it ran out, by kind, or at the peak), for the answer; None where none does."""
    return next((e for e in found.evidence for prefix in HELD_LINES
                 if e.startswith(prefix) and not e[len(prefix):].startswith(NOT_RECORDED)),
                None)
#: The memory layer's rows of a kind of memory (torch's categories), not of a line.
KINDS = ("category", "oom-category", "oom-module")
#: The model's state (parameters, gradients, an optimizer's state) holding at least this share
#: of the tensors the instant the memory ran out filled it.
FILLED = 0.5
#: The kinds of the model's state as the report says them, and what a reader can do when one
#: fills the memory (torch's memory categories' names).
KIND_WORDS = {"parameter": "parameters", "gradient": "gradients",
              "optimizer_state": "optimizer state"}
KIND_FIXES = {
    "optimizer_state": "keep a smaller optimizer state: a fused or foreach optimizer, "
                       "bf16 or 8-bit states, or sharding it across ranks (ZeRO, FSDP)",
    "parameter": "hold the parameters in bf16/fp16, or shard them across ranks (FSDP)",
    "gradient": "free gradients sooner (zero_grad(set_to_none=True)), accumulate them in "
                "bf16, or shard them across ranks",
}
#: The tensors no parameter, gradient or optimizer's state owned.
OTHER_WORDS = "other tensors (activations, inputs, temporaries)"


def kinds_at_oom(report: Report) -> list[Row]:
    """The live tensors the instant a device ran out, by kind (parameters, gradients, an
    optimizer's state, the rest), largest first: the rows a backend that took the
    allocator's snapshot then made of it."""
    rows = [r for r in report.layers.get(Layer.MEMORY, [])
            if r.attrs.get("kind") == "oom-category" and (q := r.values.get("at_oom")) is not None
            and isinstance(q.value, (int, float))]
    return sorted(rows, key=lambda r: -float(r.values["at_oom"].value or 0))


#: One kind of tensor as the finding says it: its words, its bytes, its fix (None: other).
Kind = tuple[str, float, str | None]


def _by_kind(kinds: list[Kind], source: str, action: str, keep: bool,
             asked: float | None) -> tuple[str | None, str]:
    """The evidence line of the tensors by kind when the memory ran out, and the fix: where
    the model's state (the kinds with a fix) held most of the tensors, and at least the
    allocation refused (``asked``, where known: a smaller state could make room for it), the
    fix of its largest kind; else, or where ``action`` stands (the allocator's cache held
    what was missing, a floor rose step over step: what grew is the cause), ``action``."""
    if not kinds:
        return None, action
    line = (BY_KIND + ", ".join(
        f"{words} {_bytes(size)}" for words, size, _ in kinds) + f" ({source})")
    model = [(words, size, fix) for words, size, fix in kinds if fix]
    total, held = sum(size for _, size, _ in kinds), sum(size for _, size, _ in model)
    if keep or not model or not total or held < FILLED * total or (
            asked is not None and asked > held):
        return line, action
    words, size, fix = model[0]
    return line, (f"the model's state filled {100 * held / total:.0f}% of the tensors, "
                  f"{words} the most ({_bytes(size)}): {fix}")


#: The modules a finding names by the model's state they hold; the rest are counted.
MODULES_SHOWN = 3


def _modules_line(modules: list[tuple[str, float]]) -> str | None:
    """'the model's state by module: A 2 GiB, B 1 GiB, C 10 MiB and 4 more (12 MiB)', the
    largest first, or None."""
    if not modules:
        return None
    ranked = sorted(modules, key=lambda m: (-m[1], _natural(m[0])))
    shown, rest = ranked[:MODULES_SHOWN], ranked[MODULES_SHOWN:]
    return ("the model's state by module: " + ", ".join(
        f"{name} {_bytes(size)}" for name, size in shown)
        + (f" and {len(rest)} more ({_bytes(sum(size for _, size in rest))})" if rest else ""))


def _natural(name: str) -> list[tuple[int, str]]:
    """A module's name in counting order: Sequential.2 before Sequential.10."""
    return [(int(part), "") if part.isdigit() else (0, part)
            for part in re.split(r"(\d+)", name) if part]


def modules_at_oom(report: Report) -> list[tuple[str, float]]:
    """The model's state the instant a device ran out, by the module that held it: the rows
    a backend that took the allocator's snapshot then made of it."""
    return [(r.name, float(q.value)) for r in report.layers.get(Layer.MEMORY, [])
            if r.attrs.get("kind") == "oom-module" and (q := r.values.get("at_oom")) is not None
            and isinstance(q.value, (int, float))]


def _walked_kinds(memory: dict[str, Any]) -> list[Kind]:
    """The live tensors by kind when a refused allocation killed the script (the bootstrap's
    walk, ``RunRecord.memory["tensors"]``, of the device that ran out), largest first."""
    kinds = (memory.get("tensors") or {}).get("kinds") or {}
    return sorted(((KIND_WORDS.get(k, OTHER_WORDS), float(v), KIND_FIXES.get(k))
                   for k, v in kinds.items() if v > 0), key=lambda kind: -kind[1])


def _walked_modules(memory: dict[str, Any]) -> list[tuple[str, float]]:
    """The model's state by module in the same walk."""
    found = (memory.get("tensors") or {}).get("modules") or {}
    return [(str(k), float(v)) for k, v in found.items() if v > 0]


#: Where a walk of the live tensors comes from, in the finding's words.
WALKED = "the live tensors Python held when the script died, each storage once"


def _device_finding(record: RunRecord, where: str | None, ids: str,
                    held_at_oom: tuple[list[tuple[str, float]], str | None],
                    kinds: list[Row], modules: list[tuple[str, float]],
                    profilers: list[str]) -> Finding:
    """The finding of a device's out of memory: the allocator's message, what held the device
    the instant it ran out by line, by kind and the model's by module, where a backend took a
    snapshot then, else which backend takes one (``profilers``)."""
    oom = parse(record.stderr_tail or "")
    assert oom is not None  # (what died_of_memory read)
    lines, action = evidence_and_action(oom)
    sites, measured_by = held_at_oom
    memory = record.memory or {}
    take = (f"; perfstack run --plugins {profilers[0]} takes the allocator's snapshot then (its "
            "memory option: perfstack run --help), with --keep-going, since the workload dies "
            "without a profiler too" if profilers else "; a backend of the memory layer takes "
            "the allocator's snapshot then ('perfstack plugins' lists them), with --keep-going")
    # by kind: the snapshot's rows at the instant, else the bootstrap's walk of the device's
    # tensors as the script died (in every run), else nothing
    walked = [] if kinds or (memory.get("tensors") or {}).get("device") in (None, "cpu") \
        else _walked_kinds(memory)
    if walked:
        found, source, by_module = walked, WALKED, _modules_line(_walked_modules(memory))
    else:
        found = [(r.name, float(r.values["at_oom"].value or 0),
                  KIND_FIXES.get(str(r.attrs.get("category")))) for r in kinds]
        source = f"{kinds[0].source}: each live block by the tensor it holds" if kinds else ""
        by_module = _modules_line(modules)
    if sites:
        lines.append(HELD_AT_OOM + ", ".join(
            f"{name} {_bytes(size)}" for name, size in sites)
            + f" ({measured_by}: the allocator's snapshot then)")
    elif not found:
        lines.append(HELD_AT_OOM + NOT_RECORDED + take)
    by_kind, action = _by_kind(found, source, action, keep=fragmented(oom), asked=oom.asked)
    if by_kind is not None:
        lines.append(by_kind)
    if walked and not sites:
        lines.append("the lines that allocated it: " + NOT_RECORDED + take)
    if by_module is not None:
        lines.append(by_module)
    return Finding(rule=RULE, title="out of device memory" + (f" at {where}" if where else ""),
                   layer="run", severity="critical", evidence=[*lines, f"runs: {ids}"],
                   action=action, source="perfstack")


def finding(record: RunRecord, how: str, home: str | None,
            where_raised: str | None, ids: str, profilers: list[str],
            held: tuple[list[tuple[str, float]], str | None] = ([], None),
            held_at_oom: tuple[list[tuple[str, float]], str | None] = ([], None),
            kinds: list[Row] | None = None,
            modules: list[tuple[str, float]] | None = None) -> Finding:
    """The out-of-memory finding of one run (``where_raised``: a MemoryError's raise site;
    ``profilers``: the installed backends that measure the memory layer; ``held``: what held
    the most at the peak one of them measured, and which; ``held_at_oom``: what held the
    device's memory the instant it ran out, where a backend took a snapshot then, by line,
    ``kinds`` by kind: ``kinds_at_oom``, and the model's by module: ``modules_at_oom``)."""
    memory = record.memory or {}
    where = where_raised or _where(memory, home)
    evidence: list[str] = []
    limits: dict[str, int] = memory.get("limits") or {}
    peak = memory.get("peak_rss_bytes")
    if how == "the device":  # the host's memory is beside the point
        return _device_finding(record, where, ids, held_at_oom, kinds or [], modules or [],
                               profilers)
    tail = (record.stderr_tail or "").strip().splitlines()
    asked = _CPU_ALLOCATOR.search(tail[-1]) if tail and how == "MemoryError" else None
    if how == "the OOM killer":
        killer = next((k for k in ("cgroup", "machine") if k in limits), None)
        evidence.append("killed by the kernel's OOM killer (SIGKILL)"
                        + (f" at {LIMIT_WORDS[killer]}, {_bytes(limits[killer])}" if killer
                           else "")
                        + ("; its memory cgroup counted the kill" if memory.get("oom_killed")
                           else ""))
    else:
        named = "address_space" if "address_space" in limits else None
        evidence.append((f"torch's CPU allocator refused {_bytes(int(asked[1]))}" if asked
                         else "MemoryError: an allocation was refused")
                        + (f" under {LIMIT_WORDS[named]}, {_bytes(limits[named])}" if named
                           else ""))
    if isinstance(peak, int):
        evidence.append(f"resident memory {_bytes(peak)} at its last high"
                        + (f", taken at {_where(memory, home)}" if memory.get("stack") else ""))
    sites, measured_by = held
    if sites:
        evidence.append(HELD_AT_PEAK + ", ".join(
            f"{name} {_bytes(size)}" for name, size in sites) + f" ({measured_by})")
    steps: list[int] = memory.get("step_rss_bytes") or []
    rise = _rise(steps)
    if rise is not None:
        evidence.append(f"rising step over step: {_bytes(steps[0])} after the first step "
                        f"recorded, {_bytes(steps[-1])} after step {memory.get('steps')} "
                        f"(+{_bytes(rise)} a step): a floor that rises is memory kept across "
                        "steps")
        action = ("something kept across steps holds memory (a list or cache that grows each "
                  "step, a tensor kept with its graph: loss instead of loss.item()): keep "
                  "only what the next step needs"
                  f"{'' if sites else _naming(profilers, 'that stay')}")
    else:
        action = ("one part of the work needs more memory than there is: a smaller batch, "
                  "the data in chunks or streamed instead of held whole, activation "
                  "checkpointing for a model, or a higher limit"
                  f"{'' if sites else _naming(profilers, 'that held the memory')}")
    by_kind, action = _by_kind(_walked_kinds(memory), "the live tensors Python held, each "
                               "storage once", action, keep=rise is not None,
                               asked=int(asked[1]) if asked else None)
    if by_kind is not None:
        evidence.append(by_kind)
    by_module = _modules_line(_walked_modules(memory))
    if by_module is not None:
        evidence.append(by_module)
    stack = memory.get("stack") or []
    if stack:
        evidence.append("the stack then: " + " ← ".join(
            f"{f[2]} ({str(f[0]).rsplit('/', 1)[-1]}:{f[1]})" for f in stack[:4]))
    evidence.append(f"runs: {ids}")
    return Finding(rule=RULE, title="out of memory" + (f" at {where}" if where else ""),
                   layer="run", severity="critical", evidence=evidence, action=action,
                   source="perfstack")


def out_of_memory(report: Report, raised_at: dict[str, str]) -> tuple[list[Finding], set[str]]:
    """The out-of-memory finding (the first run that died of memory names it; the others
    are counted), and the ids of the runs it explains (``raised_at``: run id -> where a
    MemoryError was raised, from its traceback)."""
    from perfstack.analysis.origin import workload_dir

    dead = [(r, how) for r in report.run.runs if r.role != "extra"
            for how in [died_of_memory(r)] if how is not None]
    if not dead:
        return [], set()
    # the first that kept what the memory watch saw (the unprofiled runs keep one)
    first, how = next(((r, h) for r, h in dead if (r.memory or {}).get("peak_rss_bytes")),
                      dead[0])
    ids = ", ".join(r.id for r, _ in dead)
    profilers = [b.name for b in report.backends if "memory" in b.layers
                 and b.status != "unavailable"]
    return ([finding(first, how, workload_dir(report), raised_at.get(first.id), ids,
                     profilers, holders(report), holders(report, when="at_oom"),
                     kinds_at_oom(report), modules_at_oom(report))],
            {r.id for r, _ in dead})
