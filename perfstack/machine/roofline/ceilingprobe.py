"""Measure what this machine can reach with torch: peak FLOP/s per element type and memory
bandwidth. Run in a process of its own (``python -m
perfstack.machine.roofline.ceilingprobe``), which prints one JSON object;
``perfstack.machine.roofline.ceilings`` starts it, caches the result and reads it back.
Nothing else of perfstack's may run meanwhile: the figures are the machine's
best, measured alone.

- **Peak FLOP/s**: square matrix products (``torch.mm``) of growing sizes in each type the
  machine runs (fp32, fp64, bf16, fp16; int8 through ``torch._int_mm`` where torch has it
  for the device; on a GPU also tf32, fp32 inputs on the tensor cores, as cuDNN runs fp32
  convolutions by default), 2·n³ operations each; the fastest of a few calls at each size
  (a peak is what the machine can reach: anything else running only slows a call down),
  the best size kept. A type whose calls are too slow to time in the budget is left out,
  with why.
- **Bandwidth**: a copy (``b.copy_(a)``: one read, one write), a triad (``a = b + s·c``: two
  reads, one write) and an update in place (``a += s·b``: two reads, one write) of arrays
  twice the last-level cache (at least 64 MiB, at most 1 GiB each), counted as the bytes
  the operation must move, the same convention as an op's bytes; the best of the three is
  the roof. (A CPU whose caches allocate on write reads a fresh output before writing it:
  the copy and the triad move a third more than they count, the update in place does not;
  an op writing a fresh output therefore tops out near three quarters of the roof.)
- **Host link** (a GPU only): copies of 256 MiB between host and device, each direction,
  from and to pinned and pageable host memory: the roof of a copy between them.
- **Dispatch floor**: the time of one tiny op (``torch.add`` of one-element tensors), the
  cost of a call that does no work; ops whose calls take a few times this are bound by it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

#: The element types measured, by the name the report uses (tf32 on a GPU only).
DTYPES = ("fp32", "tf32", "fp64", "bf16", "fp16", "int8")
SIZES = (256, 512, 1024, 2048, 4096)
#: A GPU's tensor cores reach their peak only on larger products (an H200's bf16: 671
#: TFLOP/s at 4096, about 790 at 8192).
GPU_SIZES = (*SIZES, 8192)
#: Calls timed at each size (the median kept), and the longest one call may take before
#: larger sizes are skipped; sizes stop growing once the rate rises by less than PLATEAU.
CALLS = 5
LONGEST_CALL_S = 0.6
PLATEAU = 1.05
MIB = 1 << 20


def _torch_dtype(torch: Any, name: str) -> Any:
    return {"fp32": torch.float32, "tf32": torch.float32, "fp64": torch.float64,
            "bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.int8}[name]


def _sync(torch: Any, device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize()


def _timed(torch: Any, device: str, call: Any, calls: int, best: bool = True) -> float:
    """The fastest of ``calls`` calls of ``call`` (after one untimed call), or with
    ``best`` False their median."""
    call()
    _sync(torch, device)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        _sync(torch, device)
        times.append(time.perf_counter() - start)
    return min(times) if best else statistics.median(times)


@contextmanager
def _tensor_cores(torch: Any, name: str) -> Iterator[None]:
    """fp32 products on the tensor cores (TF32) while measuring ``tf32``; torch's own
    setting otherwise, and after."""
    if name != "tf32":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def peak_flops(torch: Any, name: str, device: str,
               sizes: tuple[int, ...] = SIZES) -> tuple[float | None, dict[str, Any]]:
    """The best FLOP/s of square matrix products in one type, and how it was measured (or
    why it was not)."""
    dtype = _torch_dtype(torch, name)
    best: float | None = None
    rates: dict[str, float] = {}
    for n in sizes:
        try:
            if name == "int8":
                a = torch.randint(-8, 8, (n, n), dtype=dtype, device=device)
                b = torch.randint(-8, 8, (n, n), dtype=dtype, device=device)
                product = torch._int_mm
            else:
                a = torch.randn(n, n, device=device).to(dtype)
                b = torch.randn(n, n, device=device).to(dtype)
                product = torch.mm
            with _tensor_cores(torch, name):
                seconds = _timed(torch, device, partial(product, a, b), CALLS)
        except (RuntimeError, AttributeError, TypeError, NotImplementedError) as exc:
            if best is None:
                return None, {"why": f"torch cannot multiply {name} matrices on {device}: "
                                     f"{str(exc).splitlines()[0][:120]}"}
            break
        rate = 2.0 * n ** 3 / seconds
        rates[str(n)] = rate
        grew = best is None or rate > PLATEAU * best
        best = rate if best is None else max(best, rate)
        if seconds > LONGEST_CALL_S / 8:
            break  # the next size would take 8 times as long
        if n >= 1024 and not grew:
            break  # the rate has levelled off: a larger size would not raise it
    return best, {"sizes": rates, "calls": CALLS, "op": "torch.mm" if name != "int8"
                  else "torch._int_mm"}


def _last_level_cache() -> int | None:
    """The largest CPU cache's size in bytes (from sysfs), or None."""
    import glob

    sizes = []
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else None


def bandwidth(torch: Any, device: str, array_mib: int | None = None) -> dict[str, Any]:
    """Copy and triad bandwidth (bytes the operations must move, per second)."""
    cache = _last_level_cache() if device == "cpu" else None
    size = min(max(2 * (cache or 0), 64 * MIB), 1024 * MIB)
    if device != "cpu":
        size = 1024 * MIB
    if array_mib:
        size = array_mib * MIB
    n = size // 4
    a = torch.ones(n, device=device)
    b = torch.ones(n, device=device)
    c = torch.ones(n, device=device)
    copy_s = _timed(torch, device, lambda: b.copy_(a), CALLS)
    triad_s = _timed(torch, device, lambda: torch.add(b, c, alpha=3.0, out=a), CALLS)
    update_s = _timed(torch, device, lambda: a.add_(b, alpha=3.0), CALLS)
    rates = {"copy": 2.0 * size / copy_s, "triad": 3.0 * size / triad_s,
             "update": 3.0 * size / update_s}
    return {**rates, "best": max(rates.values()), "array_bytes": size,
            "last_level_cache": cache}


#: The buffer each direction of the host link is timed with.
LINK_MIB = 256


def host_link(torch: Any, device: str, mib: int = LINK_MIB) -> dict[str, float]:
    """Copies between host and GPU, bytes/s: each direction (``htod``, ``dtoh``), from and to
    pinned and pageable host memory, the fastest of a few copies of ``mib`` MiB. Empty on a
    CPU."""
    if device == "cpu":
        return {}
    size = mib * MIB
    gpu = torch.empty(size, dtype=torch.uint8, device=device)
    out = {}
    for host, buffer in (("pinned", torch.empty(size, dtype=torch.uint8, pin_memory=True)),
                         ("pageable", torch.empty(size, dtype=torch.uint8))):
        out[f"htod_{host}"] = size / _timed(
            torch, device, partial(gpu.copy_, buffer, non_blocking=True), CALLS)
        out[f"dtoh_{host}"] = size / _timed(
            torch, device, partial(buffer.copy_, gpu, non_blocking=True), CALLS)
    return out


def dispatch_floor(torch: Any, device: str) -> float:
    """The median time of one call of a tiny op, in seconds."""
    x = torch.ones(1, device=device)
    y = torch.ones(1, device=device)
    for _ in range(200):
        torch.add(x, y)
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(2000):
            torch.add(x, y)
        _sync(torch, device)
        batches.append((time.perf_counter() - start) / 2000)
    return statistics.median(batches)


def measure(threads: int | None, device: str = "cpu", sizes: tuple[int, ...] = SIZES,
            array_mib: int | None = None) -> dict[str, Any]:
    """Every ceiling of ``device`` at ``threads`` intra-op threads (None: torch's default);
    ``sizes`` and ``array_mib`` shrink the work for a quick check (the figures are then
    no peaks)."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    started = time.perf_counter()
    peaks: dict[str, float] = {}
    how: dict[str, Any] = {}
    if device != "cpu" and sizes == SIZES:
        sizes = GPU_SIZES
    for name in DTYPES:
        if name == "tf32" and device == "cpu":
            continue
        rate, detail = peak_flops(torch, name, device, sizes)
        how[name] = detail
        if rate is not None:
            peaks[name] = rate
    memory = bandwidth(torch, device, array_mib)
    return {
        "device": device, "threads": torch.get_num_threads(),
        "device_properties": _device_properties(torch, device),
        "torch": str(torch.__version__), "capability": _capability(torch),
        "peak_flops": peaks, "bandwidth": memory["best"], "copy_bandwidth": memory["copy"],
        "dispatch_s": dispatch_floor(torch, device),
        "link": host_link(torch, device),
        "how": {"matmul": how, "memory": memory},
        "seconds": time.perf_counter() - started,
    }


def _device_properties(torch: Any, device: str) -> dict[str, Any] | None:
    """What the GPU says of itself, in the names a trace's ``deviceProperties`` uses (its
    datasheet is found from them); None on a CPU."""
    if device == "cpu":
        return None
    props = torch.cuda.get_device_properties(torch.device(device))
    return {"name": props.name, "totalGlobalMem": props.total_memory,
            "computeMajor": props.major, "computeMinor": props.minor,
            "numSms": props.multi_processor_count,
            "warpSize": getattr(props, "warp_size", None)}


def _capability(torch: Any) -> str | None:
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):
        return None


def main(argv: list[str] | None = None) -> int:
    """Measure, print the ceilings as one JSON object."""
    parser = argparse.ArgumentParser(prog="python -m perfstack.machine.roofline.ceilingprobe")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="matrix sizes to try, comma-separated (smaller: a quick check)")
    parser.add_argument("--array-mib", type=int, default=None,
                        help="each bandwidth array's size (default: 4x the last-level cache)")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(",") if s.strip())
    json.dump(measure(args.threads, args.device, sizes, args.array_mib), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
