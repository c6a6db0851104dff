"""A small MLP trained on synthetic data: the default demo workload (seconds on 2 CPUs).

    python workloads/tiny_mlp.py --steps 30 --batch-size 64
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn


def build(width: int) -> nn.Module:
    """Return a three-layer MLP classifier."""
    return nn.Sequential(nn.Linear(256, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, 10))


def train(steps: int, batch_size: int, width: int) -> float:
    """Train for ``steps`` optimizer steps; return samples per second."""
    torch.manual_seed(0)
    model = build(width)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(batch_size, 256)
    y = torch.randint(0, 10, (batch_size,))
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return steps * batch_size / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--width", type=int, default=512)
    args = parser.parse_args()
    throughput = train(args.steps, args.batch_size, args.width)
    print(f"throughput: {throughput:.1f} samples/s")


if __name__ == "__main__":
    main()
