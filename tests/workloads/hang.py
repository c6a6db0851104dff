"""Starts a child that sleeps forever, writes their pids to $HANG_PIDS, then hangs."""

import os
import subprocess
import sys
import time


def wait_forever_for_a_lock() -> None:
    while True:
        time.sleep(0.05)


if __name__ == "__main__":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    if "HANG_PIDS" in os.environ:
        with open(os.environ["HANG_PIDS"], "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {child.pid}\n")
    wait_forever_for_a_lock()
