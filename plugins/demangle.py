"""C++ names for mangled symbols, by binutils' ``c++filt`` and, for what it leaves mangled,
LLVM's ``llvm-cxxfilt`` (well-kept demanglers; none of our own). Shared by the built-in
backends that meet mangled names: perf's symbols, and GPU kernels that torch.profiler's trace
leaves mangled (CUTLASS inside cuDNN: ``_ZN19cutlass_cudnn_train6Kernel...``, which binutils
2.40's c++filt returns unchanged and llvm-cxxfilt reads).
"""

from __future__ import annotations

import shutil
import subprocess

#: The demanglers tried in turn; each gets what the ones before it left mangled.
TOOLS = ("c++filt", "llvm-cxxfilt")


def _run(tool: str, names: list[str], params: bool) -> list[str] | None:
    try:
        out = subprocess.run([tool] if params else [tool, "-p"], input="\n".join(names) + "\n",
                             capture_output=True, text=True, check=True,
                             timeout=60).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    return out if len(out) == len(names) else None


def demangle(symbols: list[str], params: bool = False) -> dict[str, str] | None:
    """Return C++ names for the mangled (``_Z``) ``symbols`` that a demangler here reads (one
    run per tool; ``-p``: no parameter lists, unless ``params``); {} when none is mangled,
    None when no demangler is installed."""
    left = sorted({s for s in symbols if s.startswith("_Z")})
    if not left:
        return {}
    tools = [path for path in map(shutil.which, TOOLS) if path is not None]
    if not tools:
        return None
    names: dict[str, str] = {}
    for tool in tools:
        out = _run(tool, left, params)
        if out is None:
            continue
        names.update((m, d) for m, d in zip(left, out, strict=True) if d != m)
        left = [m for m in left if m not in names]
        if not left:
            break
    return names
