"""A known split: about 60% of the loop in a pure-Python function, 40% in torch matmuls.

The matmuls run from another function, one thread (``torch.set_num_threads(1)``), so the split
holds in CPU time as in wall time. The workload times both functions itself and reports the
truth as metrics (``truth_python_s``, ``truth_torch_s``, ``truth_loop_s``) for the accuracy
test of perfstack's time budget. ``--python-share`` changes the target split.
"""

import argparse
import time

import torch

import perfstack


def pure_python(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def torch_matmuls(a: torch.Tensor, count: int) -> torch.Tensor:
    out = a
    for _ in range(count):
        out = torch.mm(a, out)
        out = out / out.norm()
    return out


def _calibrate(a: torch.Tensor) -> tuple[float, float]:
    """Seconds per pure-Python iteration and per matmul, measured here."""
    pure_python(5_000)
    torch_matmuls(a, 2)
    start = time.perf_counter()
    pure_python(50_000)
    per_iter = (time.perf_counter() - start) / 50_000
    start = time.perf_counter()
    torch_matmuls(a, 8)
    per_mm = (time.perf_counter() - start) / 8
    return per_iter, per_mm


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--step-ms", type=float, default=100.0)
    parser.add_argument("--python-share", type=float, default=0.6)
    args = parser.parse_args()
    torch.set_num_threads(1)
    a = torch.randn(256, 256)
    per_iter, per_mm = _calibrate(a)
    step_s = args.step_ms / 1e3
    iters = max(1, round(step_s * args.python_share / per_iter))
    mms = max(1, round(step_s * (1 - args.python_share) / per_mm))
    in_python = in_torch = 0.0
    loop_start = time.perf_counter()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        pure_python(iters)
        t1 = time.perf_counter()
        torch_matmuls(a, mms)
        t2 = time.perf_counter()
        in_python += t1 - t0
        in_torch += t2 - t1
        perfstack.step()
    loop = time.perf_counter() - loop_start
    print(f"python {in_python:.3f} s, torch {in_torch:.3f} s, loop {loop:.3f} s "
          f"({100 * in_python / loop:.1f}% / {100 * in_torch / loop:.1f}%)")
    perfstack.report_metric("truth_python_s", in_python, "s")
    perfstack.report_metric("truth_torch_s", in_torch, "s")
    perfstack.report_metric("truth_loop_s", loop, "s")
