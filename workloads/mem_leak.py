"""A training loop with a leak whose size is known: each step keeps its outputs in a list that
is never cleared (a "history" kept for logging), so memory grows by exactly
``batch-size x width x 4`` bytes a step (256 KiB with the defaults), allocated by
``remember_outputs`` (with ``--via-hook``: kept by the forward hook ``keep_output``, allocated
by the model's last layer).

    python workloads/mem_leak.py --steps 40 --batch-size 64 --width 1024
"""

from __future__ import annotations

import argparse
import time

import torch

try:  # runs without perfstack too
    import perfstack
except ImportError:  # pragma: no cover
    perfstack = None  # type: ignore[assignment]

#: Every step's outputs, kept for "later": the leak.
HISTORY: list[torch.Tensor] = []


def remember_outputs(outputs: torch.Tensor) -> None:
    """Keep a copy of the step's outputs (batch x width float32): never freed."""
    HISTORY.append(outputs.detach().clone())


def keep_output(module: torch.nn.Module, inputs: object, output: torch.Tensor) -> None:
    """A forward hook that keeps what the module returned (--via-hook): never freed, and it
    allocates nothing itself (the module's forward did)."""
    HISTORY.append(output.detach())


def train(steps: int, batch: int, width: int, via_hook: bool = False) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width))
    if via_hook:
        model[2].register_forward_hook(keep_output)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(batch, width)
    for _ in range(steps):
        outputs = model(inputs)
        loss = outputs.square().mean()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()  # perfstack counts optimizer steps
        if not via_hook:
            remember_outputs(outputs)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--via-hook", action="store_true",
                   help="keep each step's output in a forward hook (keep_output) instead")
    a = p.parse_args()
    start = time.perf_counter()
    train(a.steps, a.batch_size, a.width, a.via_hook)
    took = time.perf_counter() - start
    leaked = sum(t.numel() * t.element_size() for t in HISTORY)
    print(f"kept {len(HISTORY)} outputs, {leaked} bytes ({leaked // len(HISTORY)} per step)")
    print(f"throughput: {a.steps * a.batch_size / took:.1f} samples/s")
