"""A hand-written data-loading loop that allocates temporaries: each sample is decoded into a
list of floats, normalised through two more lists, and thrown away once its batch is summed,
so every step makes hundreds of short-lived allocations (each freed before the next is made)
while the memory in use stays flat. Plain Python: what a loader often is before it meets
numpy or torch.

    python workloads/mem_temporaries.py --steps 20 --samples 64 --features 256
"""

from __future__ import annotations

import argparse
import time

try:
    import perfstack
except ImportError:  # pragma: no cover
    perfstack = None  # type: ignore[assignment]


def decode(i: int, features: int) -> list[float]:
    """A sample as a fresh list of floats."""
    return [float((i * 31 + j) % 97) for j in range(features)]


def normalise(values: list[float]) -> list[float]:
    """Scale a sample to [0, 1] through an intermediate list."""
    low, high = min(values), max(values)
    shifted = [v - low for v in values]
    return [v / (high - low or 1.0) for v in shifted]


def run(steps: int, samples: int, features: int) -> float:
    total = 0.0
    for step in range(steps):
        batch = [normalise(decode(step * samples + i, features)) for i in range(samples)]
        total += sum(sum(sample) for sample in batch)
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
