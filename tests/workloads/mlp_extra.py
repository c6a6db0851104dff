"""The B side of the extra-matmul case: ``mlp_base.py`` with one useless module added.

``Extra`` multiplies the activations by a 512x512 matrix and throws the product away; nothing
else differs, so a diff must lead with ``Extra.forward`` and its ``aten::mm``.
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


class Extra(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width, width), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.mm(x, self.weight)  # the useless extra work
        return x


def build(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(64, width), Block(width), Extra(width), Block(width),
                         nn.Linear(width, 10))


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
