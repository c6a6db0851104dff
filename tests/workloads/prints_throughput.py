"""A benchmark that prints its figure and never calls perfstack: 'throughput: N items/s'."""

import sys
import time

if __name__ == "__main__":
    items = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    start = time.perf_counter()
    total = sum(i * i for i in range(items))
    rate = items / (time.perf_counter() - start)
    print(f"sum {total}")
    print(f"throughput: {rate:,.1f} items/s")
