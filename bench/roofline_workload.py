"""Two ops at the machine's roofs: a large fp32 matrix product (compute-bound) and a large
in-place element-wise add over arrays far beyond the last-level cache (memory-bound).

    python bench/roofline_workload.py [--n 2048] [--elements 134217728] [--steps 6]
"""

from __future__ import annotations

import argparse

import torch

import perfstack


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2048, help="the matrices' side")
    parser.add_argument("--elements", type=int, default=128 << 20,
                        help="each added array's elements (default 128 Mi: 512 MiB of fp32)")
    parser.add_argument("--steps", type=int, default=6,
                        help="steps (the torch backend skips one, warms up one, records 3)")
    args = parser.parse_args()
    torch.manual_seed(0)
    a, b = torch.randn(args.n, args.n), torch.randn(args.n, args.n)
    x, y = torch.ones(args.elements), torch.ones(args.elements)
    for _ in range(args.steps):
        for _ in range(3):
            torch.mm(a, b)
        for _ in range(3):
            x.add_(y)
        perfstack.step()


if __name__ == "__main__":
    main()
