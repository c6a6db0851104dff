"""Reading what ``perf record`` wrote: each symbol's share of the samples from one
``perf report`` (demangled by ``demangle``), grouped by the part of the stack its shared
object belongs to, and the native CPU time split into interpreter, framework, kernels and
the rest (the ``split.*`` metrics the time budget reads)."""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import Path

from perfstack.report import Better, Metric

from ..demangle import demangle


def to_float(text: str) -> float | None:
    """A number as perf prints it ("12.5", "12.5%"), or None."""
    try:
        return float(text.strip().rstrip("%"))
    except ValueError:
        return None


#: Shared object -> the part of the stack it belongs to, first match wins.
GROUPS = (
    ("interpreter (libpython)", ("libpython", "python3")),
    ("framework (libtorch, libc10)", ("libtorch", "libc10", "libshm", "_C.cpython")),
    ("OpenMP runtime (spin/wait)", ("libgomp", "libiomp", "libomp")),
    ("JIT code (oneDNN kernels)", ("[JIT]", "[unknown]", "//anon", "perf-")),
    ("math libraries (MKL, oneDNN, BLAS)", ("libmkl", "libdnnl", "libmkldnn", "libopenblas",
                                             "libblas", "libsleef")),
    ("CUDA runtime and libraries", ("libcuda", "libcudart", "libcublas", "libcudnn", "libnccl")),
    ("OS kernel", ("[kernel", "[vdso]", "[vsyscall]")),
    ("C/C++ runtime", ("libc.so", "libc-", "libstdc++", "libm.so", "ld-linux", "libpthread")),
)


def group_of(dso: str) -> str:
    """Return the stack part a shared object belongs to."""
    for group, needles in GROUPS:
        if any(n in dso for n in needles):
            return group
    return "other"


#: Symbols of compute loops inside framework libraries (MKL is linked into libtorch_cpu).
KERNEL_SYMBOLS = ("mkl_", "gemm", "dnnl", "mkldnn", "_kernel", "Vectorized", "::vec::",
                  "sleef", "Sleef", "cpu_kernel", "basic_loop", "loop_2d", "at::native::AVX",
                  "at::native::DEFAULT", "cublas", "cudnn")

#: The time budget's split of CPU time outside the interpreter: stack group -> part.
SPLIT_PARTS = {
    "framework (libtorch, libc10)": "framework",
    "OpenMP runtime (spin/wait)": "openmp",
    "JIT code (oneDNN kernels)": "kernels",
    "math libraries (MKL, oneDNN, BLAS)": "kernels",
    "CUDA runtime and libraries": "framework",
    "OS kernel": "os",
    "C/C++ runtime": "runtime",
}


def split_part(dso: str, sym: str) -> str | None:
    """Return the budget part of a sampled symbol: None for the interpreter, else framework,
    kernels, openmp, os, runtime or other. A compute loop inside libtorch is a kernel."""
    group = group_of(dso)
    if group.startswith("interpreter"):
        return None
    part = SPLIT_PARTS.get(group, "other")
    if part == "framework" and any(k in sym for k in KERNEL_SYMBOLS):
        return "kernels"
    return part


def split_metrics(by_sym: list[tuple[float, int, str, str]]) -> list[Metric]:
    """``split.<part>``: how the CPU time outside the interpreter divides (% of it)."""
    parts: dict[str, int] = defaultdict(int)
    for _, samples, dso, sym in by_sym:
        part = split_part(dso, sym)
        if part is not None:
            parts[part] += samples
    total = sum(parts.values())
    if not total:
        return []
    return [Metric(f"split.{part}", 100 * n / total, "%", "kernel", "perftop", Better.NEITHER)
            for part, n in sorted(parts.items(), key=lambda kv: -kv[1])]


def parse_report(text: str) -> list[tuple[float, int, list[str]]]:
    """Return (percent, samples, [keys...]) from ``perf report -F overhead,sample,... -t TAB``."""
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) < 3:
            continue
        pct, samples = to_float(fields[0]), to_float(fields[1])
        if pct is not None and samples is not None:
            rows.append((pct, int(samples), fields[2:]))
    return rows


def read_symbols(data: Path) -> list[tuple[float, int, str, str]]:
    """Return (percent of the samples' period, samples, shared object, symbol) for every
    symbol of a ``perf.data``, from one ``perf report``.

    perf's own C++ demangling is most of the report's time with torch's libraries (1.65 s of
    1.76 s here): symbols are read mangled and demangled afterwards by one ``c++filt -p``,
    which gives perf's names; without c++filt, perf demangles. Percentages come from the
    period of each symbol, not from perf's two-decimal column, so a library's share (the sum
    of its symbols') is exact."""
    def report(*extra: str) -> list[tuple[float, int, list[str]]]:
        return parse_report(subprocess.run(
            ["perf", "report", "-i", str(data), "--stdio", "--no-children", "-g", "none",
             "--sort", "dso,sym", "-F", "overhead,sample,period,dso,sym", "-t", "\t",
             "--percent-limit", "0", *extra],
            capture_output=True, text=True, check=True, timeout=300).stdout)

    raw = report("--no-demangle")
    names = demangle([keys[2].split("] ", 1)[-1] for _, _, keys in raw if len(keys) > 2])
    if names is None:
        raw = report()
    total = sum(float(keys[0]) for _, _, keys in raw) or 1.0
    out = []
    for _, samples, keys in raw:
        sym = keys[2] if len(keys) > 2 else "?"
        sym = sym.removeprefix("[.] ").removeprefix("[k] ")
        out.append((100 * float(keys[0]) / total, samples, keys[1],
                    names.get(sym, sym) if names else sym))
    return out
