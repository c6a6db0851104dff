"""The probe's fp32 peak against torch's own sgemm, side by side, round by round.

    .venv/bin/python bench/ceiling_vs_sgemm.py [--rounds 5] [--size 2048]

Each round measures, alternately, the ceiling probe as ``perfstack run`` runs it (``python -m
perfstack.machine.roofline.ceilingprobe``, its fp32 peak: the fastest of its calls at the best size)
and torch's own matrix product of ``--size`` (the fastest of 10 calls after 2 untimed), each in
a process of its own, and prints both and their ratio, then min/median/max of the ratios. A
ceiling well under torch's own product means every "% of roof" is read too high; the target
is the probe within 15% of the product. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

SGEMM = """
import sys, time, torch
n = int(sys.argv[1])
a, b = torch.randn(n, n), torch.randn(n, n)
for _ in range(2):
    a @ b
best = min((lambda: (lambda t: (a @ b, time.perf_counter() - t)[1])(time.perf_counter()))()
           for _ in range(10))
print(2 * n ** 3 / best)
"""


def probe() -> float:
    """The probe's fp32 peak (FLOP/s)."""
    out = subprocess.run([sys.executable, "-m", "perfstack.machine.roofline.ceilingprobe"],
                         capture_output=True, text=True, check=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["peak_flops"]["fp32"])


def sgemm(size: int) -> float:
    """torch's own best product of ``size`` (FLOP/s)."""
    out = subprocess.run([sys.executable, "-c", SGEMM, str(size)], capture_output=True,
                         text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--size", type=int, default=2048)
    args = p.parse_args()
    ratios = []
    for r in range(1, args.rounds + 1):
        ours, theirs = probe(), sgemm(args.size)
        ratios.append(ours / theirs)
        print(f"round {r}: probe {ours / 1e9:.0f} GFLOP/s, torch {args.size}^3 "
              f"{theirs / 1e9:.0f} GFLOP/s, ratio {ratios[-1]:.3f}", flush=True)
    print(f"probe / sgemm: min {min(ratios):.3f}, median {statistics.median(ratios):.3f}, "
          f"max {max(ratios):.3f}")


if __name__ == "__main__":
    main()
