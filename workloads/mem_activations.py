"""A deep, narrow MLP trained on a large batch: the peak of its memory is mostly activations
(what the forward pass keeps for the backward pass), not parameters, gradients or optimizer
state. With the defaults the parameters are 12 x 128 x 128 x 4 B = 768 KiB (the gradients as
much; plain SGD keeps no state) while each layer keeps one 4096 x 128 x 4 B = 2 MiB
activation for the backward pass (a ReLU's output is the next Linear's saved input): 24 MiB
at the end of the forward pass.

    python workloads/mem_activations.py --steps 4 --batch-size 4096 --depth 12 --width 128
"""

from __future__ import annotations

import argparse
import time

import torch


def build(depth: int, width: int) -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def train(steps: int, batch: int, depth: int, width: int) -> None:
    torch.manual_seed(0)
    model = build(depth, width)
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    inputs = torch.randn(batch, width)
    for _ in range(steps):
        opt.zero_grad(set_to_none=False)
        loss = model(inputs).square().mean()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--depth", type=int, default=12)
    p.add_argument("--width", type=int, default=128)
    a = p.parse_args()
    start = time.perf_counter()
    train(a.steps, a.batch_size, a.depth, a.width)
    print(f"throughput: {a.steps * a.batch_size / (time.perf_counter() - start):.1f} samples/s")
