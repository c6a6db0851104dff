"""The value-pattern analysis inside the workload: what every aten op writes.

A TorchDispatchMode sees each op's outputs and counts, per op, the output elements that are
zero and the calls whose whole output is a single repeated value. Views are skipped (they
write nothing); in-place ops count, since what they write is the point. After
``max_calls`` checked calls of one op, its further calls are only counted.

Only torch and the standard library are imported here: this runs in the workload.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

RESULT = "valuepatterns.json"
#: A call counts as writing a single value only if it writes at least this many elements.
MIN_SINGLE_VALUE_ELEMENTS = 16


def start(options: dict[str, Any], folder: str) -> Callable[[], None]:
    """Enter the dispatch mode for the rest of the process; return the function that saves."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    max_calls = int(options.get("max_calls", 2000))
    stats: dict[str, dict[str, int]] = {}

    def writes(func: Any) -> bool:
        returns = func._schema.returns
        return not any(r.alias_info is not None and not r.alias_info.is_write for r in returns)

    class ValuePatterns(TorchDispatchMode):  # type: ignore[no-untyped-call]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if not writes(func):
                return out
            name = "aten::" + func.overloadpacket.__name__
            entry = stats.setdefault(name, {"calls": 0, "checked": 0, "elements": 0,
                                            "zeros": 0, "single_value_calls": 0})
            entry["calls"] += 1
            if entry["checked"] >= max_calls:
                return out
            tensors = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)
                       and t.numel() > 0 and t.layout == torch.strided and not t.is_complex()
                       and t.device.type != "meta"]
            if not tensors:
                return out
            entry["checked"] += 1
            first: Any = None
            single = True
            elements = 0
            for t in tensors:
                flat = t.detach().reshape(-1)
                elements += flat.numel()
                entry["zeros"] += int((flat == 0).sum())
                if single:
                    first = flat[0] if first is None else first
                    single = bool((flat == first).all())
            entry["elements"] += elements
            if single and elements >= MIN_SINGLE_VALUE_ELEMENTS:
                entry["single_value_calls"] += 1  # the call's whole output is one value
            return out

    mode: Any = ValuePatterns()  # type: ignore[no-untyped-call]
    mode.__enter__()

    def finish() -> None:
        mode.__exit__(None, None, None)
        tmp = os.path.join(folder, RESULT + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"max_calls": max_calls, "ops": stats}, fh)
        os.replace(tmp, os.path.join(folder, RESULT))

    return finish
