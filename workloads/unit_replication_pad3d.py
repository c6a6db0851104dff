"""One-kernel unit: ReplicationPad3d forward and backward on a wavefield (GVProf's deepwave unit).

Early in a deepwave propagation the wavefield is zero except near the source, so the pad copies
mostly zeros forward and its backward writes mostly zeros: the redundant values GVProf reports
for deepwave. ``--source-radius`` sets how much of the field is non-zero.

    python workloads/unit_replication_pad3d.py --iterations 20 --size 48
"""

import argparse

import harness
import torch

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--size", type=int, default=48)
    p.add_argument("--pad", type=int, default=4)
    p.add_argument("--source-radius", type=int, default=3)
    args = p.parse_args()
    torch.manual_seed(0)
    pad = torch.nn.ReplicationPad3d(args.pad)
    field = torch.zeros(2, 4, args.size, args.size, args.size)
    c, r = args.size // 2, args.source_radius
    field[:, :, c - r:c + r, c - r:c + r, c - r:c + r] = torch.randn(2, 4, 2 * r, 2 * r, 2 * r)
    field.requires_grad_(True)

    def step() -> None:
        field.grad = None
        (pad(field) ** 2).sum().backward()  # an energy misfit, as full-waveform inversion uses

    harness.repeat(step, args.iterations)
