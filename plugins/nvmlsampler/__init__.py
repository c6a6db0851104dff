"""The ``nvml`` backend: GPU power, energy, utilisation, memory, clocks and temperature,
sampled by a thread in the driver (``sampler``) and summarised over the measured steps
(``figures``)."""

from __future__ import annotations

from .sampler import perfstack_backends, perfstack_environment, perfstack_findings

__all__ = ["perfstack_backends", "perfstack_environment", "perfstack_findings"]
