"""A model whose parameters, gradients and Adam's state take most of the device, then a
batch that does not fit: the truth a report of what kind of tensor filled the device must
agree with. Its source says the sizes: parameters P (``--model-gib``), gradients P, Adam's
two moments 2P after the first step; then each step keeps one more ``--batch-gib`` of
activations (``hold``) until the device runs out.

    python adam_fills_device.py [--device cuda] [--model-gib 20] [--batch-gib 4] [--steps 0]
                                [--width 8192] [--limit-mib N]

``--steps 0`` runs until the device runs out. On a CPU, ``--limit-mib N`` first limits the
process's address space to what it has plus N MiB (``resource.setrlimit``): torch's CPU
allocator then refuses an allocation as a device's would.
"""

import argparse
import resource

import torch

import perfstack


def hold(held: list[torch.Tensor], model: torch.nn.Module, nbytes: int) -> None:
    held.append(torch.ones(nbytes // 4, device=next(model.parameters()).device))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--model-gib", type=float, default=20.0)
    p.add_argument("--batch-gib", type=float, default=4.0)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--width", type=int, default=8192)  # float32 8192x8192: 256 MiB a layer
    p.add_argument("--limit-mib", type=int)
    ns = p.parse_args()
    if ns.limit_mib is not None:
        with open("/proc/self/statm") as fh:
            size = int(fh.read().split()[0]) * resource.getpagesize()
        limit = size + ns.limit_mib * (1 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    width = ns.width
    layers = max(1, round(ns.model_gib * (1 << 30) / (width * width * 4)))
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False, device=ns.device)
                                  for _ in range(layers)])  # (made there: no host copy)
    adam = torch.optim.Adam(model.parameters(), foreach=False)  # (no whole-model temporaries)
    for weight in model.parameters():  # gradients as a backward pass leaves them
        weight.grad = torch.ones_like(weight)
    adam.step()  # Adam's two moments, as large as the parameters each
    held: list[torch.Tensor] = []
    step = 0
    while ns.steps == 0 or step < ns.steps:
        hold(held, model, int(ns.batch_gib * (1 << 30)))
        perfstack.step()
        step += 1
