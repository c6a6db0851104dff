"""Keeps 2 GiB more of device memory each step until the device runs out: the truth a CUDA
out-of-memory report must agree with (it dies in ``keep``, the allocator's message names the
2 GiB asked; nothing in the allocator's cache: the tensors filled the device).

    python grows_on_device.py [--device cuda] [--step-gib 2]
"""

import argparse

import torch

import perfstack


def keep(kept: list[torch.Tensor], step_bytes: int, device: str) -> None:
    kept.append(torch.ones(step_bytes // 4, device=device))  # touched: float32 ones


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--step-gib", type=float, default=2.0)
    ns = p.parse_args()
    kept: list[torch.Tensor] = []
    while True:
        keep(kept, int(ns.step_gib * (1 << 30)), ns.device)
        perfstack.step()
