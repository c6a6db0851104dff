"""A worker thread marks the steps while the main thread waits on a queue for its results
(50 items): under ``--steps`` only the main thread's steps may count, or the worker would be
ended mid-way and the main thread would wait for ever."""

import queue
import threading

import perfstack

ITEMS = 50


def worker(out: "queue.Queue[int]") -> None:
    for i in range(ITEMS):
        out.put(i * i)
        perfstack.step()


if __name__ == "__main__":
    results: "queue.Queue[int]" = queue.Queue()
    threading.Thread(target=worker, args=(results,), daemon=True).start()
    total = sum(results.get(timeout=30) for _ in range(ITEMS))
    print(f"got {ITEMS} items, total {total}")
