"""A data-loading loop that allocates temporaries: each sample is decoded into a list of
floats, normalised through two more lists and a string key, and thrown away, so every step
makes thousands of short-lived allocations (each freed before the next is made) while the
memory in use stays flat.

    python workloads/mem_temporaries.py --steps 20 --samples 64 --features 256
"""

from __future__ import annotations

import argparse
import time

import torch

try:
    import perfstack
except ImportError:  # pragma: no cover
    perfstack = None  # type: ignore[assignment]


def decode(i: int, features: int) -> list[float]:
    """A sample as a fresh list of floats (what a hand-written loader often does)."""
    return [float((i * 31 + j) % 97) for j in range(features)]


def normalise(values: list[float]) -> torch.Tensor:
    """Scale a sample to [0, 1] through two intermediate lists and a key string."""
    low, high = min(values), max(values)
    shifted = [v - low for v in values]
    scaled = [v / (high - low or 1.0) for v in shifted]
    _key = "sample-" + str(len(scaled))
    return torch.tensor(scaled)


def run(steps: int, samples: int, features: int) -> float:
    total = 0.0
    for step in range(steps):
        batch = torch.stack([normalise(decode(step * samples + i, features))
                             for i in range(samples)])
        total += float(batch.sum())
        if perfstack is not None:
            perfstack.step()
    return total


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--samples", type=int, default=64)
    p.add_argument("--features", type=int, default=256)
    a = p.parse_args()
    start = time.perf_counter()
    total = run(a.steps, a.samples, a.features)
    took = time.perf_counter() - start
    print(f"sum {total:.1f}")
    print(f"throughput: {a.steps * a.samples / took:.1f} samples/s")
