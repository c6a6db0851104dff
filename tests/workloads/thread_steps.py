"""A training loop run in a worker thread while the main thread waits for it, beside a feeder
thread that blocks for ever on a full queue: under ``--steps`` the worker's steps count, the
run ends at its limit (the main thread is ended where it waits), and the blocked feeder gets a
bounded wait. Without ``--steps`` the loop runs its 10,000 steps (about 10 s or more)."""

import queue
import threading
import time

import perfstack

STEPS = 10_000


def train(results: "queue.Queue[int]") -> None:
    for i in range(STEPS):
        time.sleep(0.001)
        results.put(i)
        perfstack.step()


def feeder() -> None:
    full: queue.Queue[int] = queue.Queue(maxsize=1)
    while True:
        full.put(1)  # blocks for ever once the queue is full: a thread that never ends


if __name__ == "__main__":
    threading.Thread(target=feeder, name="feeder").start()
    results: "queue.Queue[int]" = queue.Queue()
    trainer = threading.Thread(target=train, args=(results,), name="trainer")
    trainer.start()
    trainer.join()
    print(f"trained {results.qsize()} steps")
