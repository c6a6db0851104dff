"""Leaves two processes in its own process group that end by themselves once it has: the
resource tracker a spawned multiprocessing child starts, and a forked child that waits for
its parent to exit, then tidies up for 50 ms and writes "cleaned" to $CLEANED."""

import multiprocessing
import os
import time


def hello() -> None:
    print("spawned child ran")


if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=hello)
    child.start()  # also starts multiprocessing's resource tracker, which outlives this
    child.join()
    if os.fork() == 0:
        parent = os.getppid()
        while os.getppid() == parent:
            time.sleep(0.005)
        time.sleep(0.05)
        with open(os.environ["CLEANED"], "w", encoding="utf-8") as fh:
            fh.write("cleaned")
        os._exit(0)
    print("parent done")
