"""What kind of tensor held the memory when the workload ran out: the live parameters, their
gradients, every optimizer's state, and the rest (activations, inputs, temporaries), found
among the objects Python's cyclic collector tracks. For the out-of-memory post-mortem: torch
backend's CUDA observer files the allocator's blocks by :func:`owners`; the bootstrap, when
the script dies of a refused host allocation, writes :func:`held` into the run's folder.

Standard library only: torch is the workload's (given, or taken from ``sys.modules``). A walk
of every object: a fraction of a second, once, after the memory ran out.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from typing import Any

from perfstack.runfolder.filenames import TENSORS_AT_OOM_FILE

#: The kinds, in torch's memory categories' names; a tensor of none of them is "other".
PARAMETER, GRADIENT, OPTIMIZER_STATE, OTHER = "parameter", "gradient", "optimizer_state", "other"


def _storage(value: Any, tensor: Any) -> tuple[int, int, str] | None:
    """A tensor's storage: its address, its bytes and its device's type, or None."""
    if not isinstance(value, tensor):
        return None
    with contextlib.suppress(Exception):  # a lazy module's uninitialised parameter, a meta
        storage = value.untyped_storage()
        address = int(storage.data_ptr())
        if address:
            return address, int(storage.nbytes()), str(value.device.type)
    return None


def _walk(torch: Any) -> tuple[dict[int, str], dict[int, tuple[int, str]]]:
    """Every storage the model owns by address (its kind), and every live tensor's storage
    by address (its bytes and device type), each once."""
    tensor, parameter, optimizer = torch.Tensor, torch.nn.Parameter, torch.optim.Optimizer
    owned: dict[int, str] = {}
    seen: dict[int, tuple[int, str]] = {}

    def own(value: Any, kind: str) -> None:
        found = _storage(value, tensor)
        if found is not None:
            owned.setdefault(found[0], kind)
            seen[found[0]] = found[1:]

    for obj in gc.get_objects():
        kind = type(obj)  # (issubclass: Parameter's isinstance asks every object's attributes)
        if issubclass(kind, parameter):
            own(obj, PARAMETER)
            own(obj.grad, GRADIENT)
        elif issubclass(kind, optimizer):
            for state in list(getattr(obj, "state", {}).values()):
                for value in list(state.values()) if isinstance(state, dict) else []:
                    own(value, OPTIMIZER_STATE)
        elif issubclass(kind, tensor):
            found = _storage(obj, tensor)
            if found is not None:
                seen[found[0]] = found[1:]
    return owned, seen


def owners(torch: Any) -> dict[int, str]:
    """The storages of the live parameters, their gradients and every optimizer's state, by
    address: what a device allocator's live blocks belonged to."""
    return _walk(torch)[0]


def held(torch: Any, device: str = "cpu") -> dict[str, int]:
    """The bytes of the live tensors on ``device`` (a device type) by kind, each storage
    once, largest first. Tensors no Python object holds (autograd's saved tensors) are not
    among them."""
    owned, seen = _walk(torch)
    out: dict[str, int] = {}
    for address, (size, where) in seen.items():
        if where == device:
            kind = owned.get(address, OTHER)
            out[kind] = out.get(kind, 0) + size
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def died_of_memory(exc: BaseException) -> bool:
    """Whether the script's exception is a refused host allocation: Python's MemoryError, or
    torch's CPU allocator's ("DefaultCPUAllocator: can't allocate memory")."""
    return isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and "DefaultCPUAllocator" in str(exc))


def after_death(exc: BaseException, folder: str) -> None:
    """Where the script died of a refused host allocation and imported torch, write what
    kind of tensor held the host's memory then (before the frames that hold them unwind);
    never raises (the memory is short: a failure leaves the file out)."""
    torch = sys.modules.get("torch")
    if torch is None or not died_of_memory(exc):
        return
    with contextlib.suppress(Exception):
        kinds = held(torch)
        path = os.path.join(folder, TENSORS_AT_OOM_FILE)
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            json.dump({"device": "cpu", "kinds": kinds}, fh)
        os.replace(path + ".tmp", path)
