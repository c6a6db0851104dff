"""One-kernel unit: a single spatial convolution, forward and backward (GVProf's resnet unit).

    python workloads/unit_spatial_convolution.py --iterations 20
"""

import argparse

import harness
import torch

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--channels", type=int, default=64)
    p.add_argument("--size", type=int, default=56)
    args = p.parse_args()
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(args.channels, args.channels, 3, padding=1)
    x = torch.randn(args.batch_size, args.channels, args.size, args.size, requires_grad=True)
    harness.repeat(lambda: conv(x).sum().backward(), args.iterations)
