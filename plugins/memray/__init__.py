"""The ``memray`` backend: where the memory goes, by Python function (memory layer).

Bloomberg's memray tracks every allocation of the workload process (malloc, mmap and what
goes through them: torch's CPU tensors, numpy's arrays, Python's object arenas), with native
frames, in a run of its own: the bootstrap starts memray's ``Tracker`` before the script
(``inproc``) and notes when each step ended. The capture is read through memray's reader API
(``capture``): the peak of the heap and when it happened, what each function held at the
peak, allocated over the run and still held at exit, its temporary allocations, and how much
more it held after each step than after the one before; its findings (memory that grows step
over step, temporaries in the hot loop) come from there.
"""

from __future__ import annotations

from typing import Any

from perfstack import hookimpl

from .backend import MemrayBackend


@hookimpl
def perfstack_backends() -> list[Any]:
    """Provide the memray backend."""
    return [MemrayBackend()]
