"""A small MLP training loop, the A side of the extra-matmul case (``perfstack ab``).

``mlp_extra.py`` is the same script with one useless module added (``Extra``: a 512x512
matmul per batch). Its name differs on purpose: the two sides are two versions of one
workload, and a diff must match the user's functions across them.
"""

import argparse
import time

import torch
from torch import nn

import perfstack


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


def build(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(64, width), Block(width), Block(width), nn.Linear(width, 10))


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
               y: torch.Tensor) -> None:
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = build(512)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(args.batch_size, 64), torch.randint(0, 10, (args.batch_size,))
    train_step(model, opt, x, y)
    start = time.perf_counter()
    for _ in range(args.steps):
        train_step(model, opt, x, y)
    rate = args.steps * args.batch_size / (time.perf_counter() - start)
    print(f"throughput: {rate:.0f} samples/s")
    perfstack.report_metric("throughput", rate, "samples/s", "higher")
