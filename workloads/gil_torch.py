"""torch matrix products on threads: the ops run in C++ with the GIL released.

Each thread multiplies its own matrices with torch's intra-op parallelism set to one thread,
so the scaling comes from Python threads alone; torch releases the GIL inside each op, so it
scales on CPython with the GIL. The thread count comes from ``PERFSTACK_THREADS``.

``torch.set_num_threads`` sets OpenMP's thread count for the calling thread only: a new
Python thread starts with OpenMP's default (every core), so each worker sets it again. Without
that, N Python threads each start an OpenMP team as wide as the machine: oversubscription,
and no speed-up at all (measured: 2 threads gave 0.98x on 2 cores).

    perfstack run --plugins gil workloads/gil_torch.py
"""

from __future__ import annotations

import argparse
import threading

import threaded
import torch

_ready = threading.local()


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """One item: a matrix product on one core."""
    if not getattr(_ready, "done", False):
        torch.set_num_threads(1)  # per thread: OpenMP's setting is thread-local
        _ready.done = True
    return torch.mm(a, b)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=600, help="matmuls (default 600)")
    parser.add_argument("--size", type=int, default=384, help="matrix size (default 384)")
    args = parser.parse_args()
    a = torch.randn(args.size, args.size)
    b = torch.randn(args.size, args.size)
    threaded.run("gil_torch", args.items, lambda i: matmul(a, b))
