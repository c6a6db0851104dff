"""One-kernel unit: ReplicationPad3d forward and backward (GVProf's deepwave unit).

The backward of a replication pad accumulates the padded border back into the edge cells of a
gradient that starts as zeros: a redundant-values pattern GVProf reports.

    python workloads/unit_replication_pad3d.py --iterations 20
"""

import argparse
import time

import torch

try:
    import perfstack
except ImportError:  # pragma: no cover
    perfstack = None

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--size", type=int, default=48)
    p.add_argument("--pad", type=int, default=4)
    args = p.parse_args()
    torch.manual_seed(0)
    pad = torch.nn.ReplicationPad3d(args.pad)
    x = torch.randn(2, 4, args.size, args.size, args.size, requires_grad=True)
    start = time.perf_counter()
    for _ in range(args.iterations):
        pad(x).sum().backward()
        if perfstack:
            perfstack.step()
    rate = args.iterations / (time.perf_counter() - start)
    print(f"throughput: {rate:.2f} iterations/s")
    if perfstack:
        perfstack.report_metric("throughput", rate, "iterations/s")
