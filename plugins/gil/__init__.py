"""The ``gil`` backend: is the GIL what limits this workload, and would free-threading help?

Three measurements, one backend (opt-in: it runs the workload many times):

1. GIL pressure in one run under the current interpreter, at the highest thread count: a
   probe thread inside the workload measures how long a thread waits to get the GIL back
   (``probe.py``), and, where py-spy can attach, per-thread shares of samples holding the GIL.
2. A thread sweep: the workload again at 1, 2, ... threads (``PERFSTACK_THREADS``), repeated
   and interleaved, under the current interpreter and under a free-threaded one with
   ``PYTHON_GIL=0`` (``--gil-python PATH``, else found on PATH or in perfstack's cache). The
   measure is the workload's own ``throughput`` metric, else its wall time.
3. A verdict: GIL-bound, I/O-bound, scales (native code releases the GIL), or no scaling.

py-spy cannot sample free-threaded builds yet, so the free-threaded side is timing only.
"""

from __future__ import annotations

from perfstack import hookimpl
from perfstack.plugin.backend import Backend

from .backend import GilBackend
from .sweep import parse_thread_counts as parse_thread_counts
from .sweep import with_thread_arg as with_thread_arg
from .verdict import Series as Series  # Series and verdict: also this package's API
from .verdict import verdict as verdict


@hookimpl
def perfstack_backends() -> list[Backend]:
    """Provide the gil backend."""
    return [GilBackend()]
