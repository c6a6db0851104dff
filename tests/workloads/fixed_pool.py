"""Pure-Python worker threads whose count is the program's own argument (``--threads``,
default 4): it ignores PERFSTACK_THREADS, as most programs do."""

from __future__ import annotations

import argparse
import threading


def work(items: int, out: list[int]) -> None:
    """Pure bytecode: the thread holds the GIL all along."""
    total = 0
    for i in range(items):
        for n in range(20_000):
            total += (n * i) % 7
    out.append(total)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--items", type=int, default=40)
    args = parser.parse_args()
    results: list[int] = []
    threads = [threading.Thread(target=work, args=(args.items // args.threads, results))
               for _ in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(sum(results))
