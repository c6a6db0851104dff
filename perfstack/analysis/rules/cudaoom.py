"""A device's out-of-memory error, read from the message the caching allocator writes
(``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a
total capacity of 8.00 GiB of which 0 bytes is free. ... Of the allocated memory 14.51 GiB
is allocated by PyTorch, and 15.90 MiB is reserved by PyTorch but unallocated. ...``; XPU's
says the same): what was asked, what was free, what the tensors held and what the
allocator's cache held beside them, and so which fix fits."""

from __future__ import annotations

import re

from perfstack.records import datarecord
from perfstack.report.units import fmt_value

_SIZE = r"(?:[\d.]+ (?:[KMGTP]i)?B|0 bytes)"
_MESSAGE = re.compile(
    rf"(?P<kind>CUDA|XPU) out of memory\. Tried to allocate (?P<ask>{_SIZE})\. GPU "
    rf"(?P<gpu>\d+) has a total capac\w* of (?P<total>{_SIZE}) of which (?P<free>{_SIZE}) "
    rf"is free\..*?Of the allocated memory (?P<tensors>{_SIZE}) is allocated by PyTorch, "
    rf"and (?P<cache>{_SIZE}) is reserved by PyTorch but unallocated", re.S)
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "PiB": 1 << 50}
#: The allocator's cache beside the tensors, as a share of what PyTorch reserved, past which
#: the fix is the allocator's (fragmentation), not less memory.
CACHE_SHARE = 0.25


def _bytes(text: str) -> float:
    if text == "0 bytes":
        return 0.0
    number, unit = text.split()
    return float(number) * _UNITS[unit]


@datarecord(frozen=True)
class DeviceOom:
    """What a device's out-of-memory message says, in bytes."""

    kind: str  # "CUDA" or "XPU"
    gpu: int
    asked: float
    total: float
    free: float
    tensors: float  # allocated by PyTorch: live tensors
    cache: float  # reserved by PyTorch but unallocated: the caching allocator's slack


def parse(text: str) -> DeviceOom | None:
    """The last device out-of-memory message in ``text`` (a process's stderr), or None."""
    found = list(_MESSAGE.finditer(text))
    if not found:
        return None
    m = found[-1]
    return DeviceOom(m["kind"], int(m["gpu"]), _bytes(m["ask"]), _bytes(m["total"]),
                     _bytes(m["free"]), _bytes(m["tensors"]), _bytes(m["cache"]))


def fragmented(oom: DeviceOom) -> bool:
    """Whether the allocator's cache, not the tensors, held what was missing: a large share
    of what PyTorch reserved, or more than was asked."""
    held = oom.tensors + oom.cache
    return held > 0 and (oom.cache >= CACHE_SHARE * held or oom.cache >= oom.asked)


def evidence_and_action(oom: DeviceOom) -> tuple[list[str], str]:
    """The finding's lines, and its fix: the allocator's (fragmentation) where its cache
    held the memory, else less memory."""
    def size(b: float) -> str:
        return fmt_value(b, "B")

    lines = [f"{oom.kind} out of memory on GPU {oom.gpu}: {size(oom.asked)} asked, "
             f"{size(oom.free)} free of {size(oom.total)}",
             f"PyTorch held {size(oom.tensors)} in tensors and {size(oom.cache)} more in its "
             "caching allocator (reserved, unallocated)"]
    if fragmented(oom):
        action = (f"the allocator's cache held {size(oom.cache)} no tensor used, in pieces too "
                  f"small for the {size(oom.asked)} asked (fragmentation): "
                  "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets it grow segments "
                  "instead of splitting them")
    else:
        action = ("the tensors themselves filled the device: a smaller batch (with gradient "
                  "accumulation), activation checkpointing (torch.utils.checkpoint), bf16 "
                  "autocast (half the activations), and no tensor kept across steps (a loss "
                  "kept with its graph: keep loss.item())")
    return lines, action
