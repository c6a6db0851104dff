"""Leaves two processes behind: a child in a session of its own, and a double-forked daemon;
each one's pid goes to $LEFT_PIDS, one per line."""

import os
import subprocess
import sys
import time


def note(pid: int) -> None:
    with open(os.environ["LEFT_PIDS"], "a", encoding="utf-8") as fh:
        fh.write(f"{pid}\n")


if __name__ == "__main__":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"],
                             start_new_session=True)
    note(child.pid)
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:  # the daemon
            note(os.getpid())
            time.sleep(3600)
        os._exit(0)
    os.waitpid(first, 0)
    time.sleep(0.3)  # the daemon has written its pid
