"""Keeps 4 MiB of bytes objects alive from one line for a while: a dominant allocation site."""

import time

kept = [bytes(4096) for _ in range(1024)]
time.sleep(0.3)
print(len(kept))
