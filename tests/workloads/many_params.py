"""A deep stack of small layers trained with Adam: the optimizer's per-parameter loop (no
foreach, no fused) is a large part of each step. ``--fused`` builds Adam(fused=True)."""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--fused", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(32, 32) for _ in range(args.layers)])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False, fused=args.fused)
    x, y = torch.randn(4, 32), torch.randn(4, 32)
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    elapsed = time.perf_counter() - start
    print(f"{elapsed / args.steps * 1e3:.2f} ms/step")
