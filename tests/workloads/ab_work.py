"""A/B workload: each step runs a pure-Python part and a torch part.

``--slow`` does 30% more matrix products in ``matmul_block`` (and nothing else changes), so a
diff of a run with and without it must name that function, the ``aten::mm`` op and the
throughput metric, and nothing else beyond noise.
"""

import argparse
import time

import torch

import perfstack


def python_part(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def matmul_block(a: torch.Tensor, count: int) -> torch.Tensor:
    out = a
    for _ in range(count):
        out = torch.mm(a, a)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--slow", action="store_true")
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)
    a = torch.randn(384, 384)
    count = 26 if args.slow else 20
    start = time.perf_counter()
    for _ in range(args.steps):
        python_part(60_000)
        matmul_block(a, count)
        perfstack.step()
    rate = args.steps / (time.perf_counter() - start)
    print(f"throughput: {rate:.2f} steps/s")
    perfstack.report_metric("throughput", rate, "steps/s")
