"""A small MLP trained under torch.autocast in bf16 (on the CPU here; ``--device cuda`` on a
GPU): its linear layers' matrix products run in bf16 though the model's weights are fp32."""

from __future__ import annotations

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--width", type=int, default=512)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(args.width, 2 * args.width), torch.nn.GELU(),
                                torch.nn.Linear(2 * args.width, args.width)).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, args.width, device=args.device)
    for _ in range(args.steps):
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16):
            # addmm called directly, as GPT-2's Conv1D does, and through nn.Linear
            y = torch.addmm(model[0].bias, x, model[0].weight.t())
            loss = model(x).float().pow(2).mean() + y.float().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
