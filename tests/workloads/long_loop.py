"""A long pure-Python loop (100,000 steps of about 10 ms unless told otherwise), marking each
step with perfstack.step(): under ``perfstack run --steps`` every run must end after its
steps, cleanly, with this script's ``finally`` run. No torch: quick to start."""

import sys
import time

import perfstack


def work(seconds: float) -> int:
    end, total = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        total += sum(i * i % 7 for i in range(200))
    return total


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    done = 0
    try:
        for _ in range(steps):
            work(0.01)
            done += 1
            perfstack.step()
    finally:
        print(f"finally: {done} steps done")
