"""Linux ``perf``: the ``perf`` backend (``perf stat``: counters, ``backend``) and the
``perftop`` backend (``perf record``: the hottest native symbols, grouped by the part of the
stack their shared object is, ``symbols``)."""

from __future__ import annotations

from .backend import perfstack_backends, perfstack_environment, perfstack_findings

__all__ = ["perfstack_backends", "perfstack_environment", "perfstack_findings"]
