"""The bytes a collective kernel moves over the links, as NCCL's own tests count them.

Kineto writes on each NCCL/RCCL kernel the collective's name, its message size in elements
(``In msg nelems``, ``Out msg nelems``), the element type and the group's size. The data a
collective moves is ``S``, the larger of its input and output in bytes (an all-gather's output
is every rank's input; a reduce-scatter's input is every rank's output), and the part of it
each rank must send or receive over its links, whatever the algorithm, is ``S`` times a
factor that depends on the collective and the group's size ``n`` (nccl-tests' "bus
bandwidth"): all-reduce ``2(n-1)/n``, all-gather, reduce-scatter and all-to-all ``(n-1)/n``,
broadcast, reduce, send and receive ``1``. Bytes over time is then a figure to hold against
the link's bandwidth (NVLink, InfiniBand), the same for 2 ranks as for 1,000.
"""

from __future__ import annotations

import re
from typing import Any

#: Bytes per element of the scalar types Kineto names (c10's ScalarType names).
ITEM_BYTES = {
    "float": 4, "double": 8, "half": 2, "bfloat16": 2, "complexhalf": 4, "complexfloat": 8,
    "complexdouble": 16, "byte": 1, "char": 1, "short": 2, "int": 4, "long": 8, "bool": 1,
    "uint16": 2, "uint32": 4, "uint64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "qint8": 1, "quint8": 1, "qint32": 4,
}


def bus_factor(collective: str, n: int) -> float | None:
    """The share of the data each rank moves over its links (None: a collective not
    counted: a barrier, a coalesced group, one not named)."""
    name = re.sub(r"[^a-z]", "", collective.lower())
    if n < 1:
        return None
    if "allreduce" in name:
        return 2 * (n - 1) / n
    if any(k in name for k in ("allgather", "reducescatter", "alltoall")):
        return (n - 1) / n
    if name in ("broadcast", "reduce", "send", "recv", "sendrecv"):
        return 1.0
    return None


def bus_bytes(collective: Any, nelems_in: Any, nelems_out: Any, dtype: Any,
              group_size: Any) -> float | None:
    """The bytes a collective kernel moves over each rank's links, from its trace arguments;
    None where the trace does not say enough."""
    try:
        n = int(group_size)
        elements = max(int(nelems_in or 0), int(nelems_out or 0))
    except (TypeError, ValueError):
        return None
    item = ITEM_BYTES.get(str(dtype).lower()) if dtype is not None else None
    factor = bus_factor(str(collective), n) if collective is not None else None
    if item is None or factor is None or elements <= 0:
        return None
    return elements * item * factor
