"""What kind of tensor held the memory when the workload ran out: the live parameters, their
gradients, every optimizer's state, and the rest (activations, inputs, temporaries), found
among the objects Python's cyclic collector tracks. For the out-of-memory post-mortem: torch
backend's CUDA observer files the allocator's blocks by :func:`owners`; the bootstrap, when
the script dies of a refused allocation (the host's or a device's), writes :func:`held` of
that device into the run's folder.

Standard library only: torch is the workload's (given, or taken from ``sys.modules``). A walk
of every object: a fraction of a second, once, after the memory ran out.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
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


#: How deep below its model a module names the model's state it holds ("transformer.h").
MODULE_DEPTH = 2
#: The attributes under which a wrapper holds the model (DistributedDataParallel, FSDP,
#: torch.compile's OptimizedModule): the model is named, not the wrapper.
WRAPPERS = ("module", "_fsdp_wrapped_module", "_orig_mod")


def _modules(roots: list[Any]) -> dict[int, str]:
    """Each parameter of the models (the modules no other module holds), by id, with the
    module that holds it, at most :data:`MODULE_DEPTH` below its model: ``Model.part.sub``."""
    out: dict[int, str] = {}
    for root in roots:
        with contextlib.suppress(Exception):  # a module whose parameters cannot be listed
            for name, param in root.named_parameters():
                path, model = name.split(".")[:-1], root
                while path and path[0] in WRAPPERS:
                    model, path = getattr(model, path[0], model), path[1:]
                out.setdefault(id(param), ".".join([type(model).__name__,
                                                    *path[:MODULE_DEPTH]]))
    return out


def _walk(torch: Any) -> tuple[dict[int, str], dict[int, tuple[int, str]], dict[int, str]]:
    """Every storage the model owns by address (its kind), every live tensor's storage by
    address (its bytes and device type), each once, and the model's storages by the module
    that holds them (a gradient and an optimizer's state go with their parameter)."""
    tensor, parameter, optimizer = torch.Tensor, torch.nn.Parameter, torch.optim.Optimizer
    owned: dict[int, str] = {}
    seen: dict[int, tuple[int, str]] = {}
    held_by: dict[int, Any] = {}  # storage address -> its parameter
    params: list[Any] = []
    optimizers: list[Any] = []
    modules: list[Any] = []

    def own(value: Any, kind: str, param: Any) -> None:
        found = _storage(value, tensor)
        if found is not None:
            owned.setdefault(found[0], kind)
            seen[found[0]] = found[1:]
            held_by.setdefault(found[0], param)

    for obj in gc.get_objects():
        kind = type(obj)  # (issubclass: Parameter's isinstance asks every object's attributes)
        if issubclass(kind, parameter):
            params.append(obj)
        elif issubclass(kind, optimizer):
            optimizers.append(obj)
        elif issubclass(kind, torch.nn.Module):
            modules.append(obj)
        elif issubclass(kind, tensor):
            found = _storage(obj, tensor)
            if found is not None:
                seen[found[0]] = found[1:]
    for param in params:
        own(param, PARAMETER, param)
        own(param.grad, GRADIENT, param)
    for opt in optimizers:
        for param, state in list(getattr(opt, "state", {}).items()):
            for value in list(state.values()) if isinstance(state, dict) else []:
                own(value, OPTIMIZER_STATE, param)
    inner = {id(m) for module in modules for m in getattr(module, "_modules", {}).values()}
    where = _modules([m for m in modules if id(m) not in inner])
    module = {address: where[id(param)] for address, param in held_by.items()
              if id(param) in where}
    return owned, seen, module


def owners(torch: Any) -> tuple[dict[int, str], dict[int, str]]:
    """The storages of the live parameters, their gradients and every optimizer's state, by
    address: what a device allocator's live blocks belonged to (their kind, and the module
    that holds them)."""
    owned, _, module = _walk(torch)
    return owned, module


def _sorted(sizes: dict[str, int]) -> dict[str, int]:
    return dict(sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0])))


def held(torch: Any, device: str = "cpu") -> tuple[dict[str, int], dict[str, int]]:
    """The bytes of the live tensors on ``device`` (a device type) by kind, each storage
    once, and of the model's state by the module that holds it, each largest first. Tensors
    no Python object holds (autograd's saved tensors) are not among them."""
    owned, seen, module = _walk(torch)
    kinds: dict[str, int] = {}
    modules: dict[str, int] = {}
    for address, (size, where) in seen.items():
        if where == device:
            kind = owned.get(address, OTHER)
            kinds[kind] = kinds.get(kind, 0) + size
            if address in module:
                modules[module[address]] = modules.get(module[address], 0) + size
    return _sorted(kinds), _sorted(modules)


#: A device allocator's refusal as torch words it ("CUDA out of memory. Tried to allocate
#: ..."; ROCm's builds say HIP), and the device type its tensors are on.
_DEVICE_OOM = re.compile(r"^\s*(CUDA|HIP|XPU) out of memory")
_DEVICE_TYPES = {"CUDA": "cuda", "HIP": "cuda", "XPU": "xpu"}


def oom_device(exc: BaseException) -> str | None:
    """The device type whose memory the script's exception says ran out: "cpu" for a
    refused host allocation (Python's MemoryError, torch's CPU allocator's "DefaultCPUAllocator:
    can't allocate memory"), "cuda" or "xpu" for a device allocator's out-of-memory error
    (torch.OutOfMemoryError); None for any other exception."""
    if isinstance(exc, MemoryError) or (
            isinstance(exc, RuntimeError) and "DefaultCPUAllocator" in str(exc)):
        return "cpu"
    found = _DEVICE_OOM.match(str(exc)) if isinstance(exc, RuntimeError) else None
    return _DEVICE_TYPES[found[1]] if found else None


def after_death(exc: BaseException, folder: str) -> None:
    """Where the script died of a refused allocation (on the host or a device) and imported
    torch, write what kind of tensor held that memory then (before the frames that hold them
    unwind): in every run, the unprofiled ones too, at no cost until then. Never raises (the
    memory is short: a failure leaves the file out)."""
    torch = sys.modules.get("torch")
    device = oom_device(exc)
    if torch is None or device is None:
        return
    with contextlib.suppress(Exception):
        kinds, modules = held(torch, device)
        path = os.path.join(folder, TENSORS_AT_OOM_FILE)
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            json.dump({"device": device, "kinds": kinds, "modules": modules}, fh)
        os.replace(path + ".tmp", path)
