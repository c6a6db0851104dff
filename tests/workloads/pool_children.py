"""The work is done in two forked worker processes (as DataLoader workers do it) while the
main process waits for their results: each task burns a fixed amount of CPU time in
``crunch``, so the children's CPU time is about 2 s on any machine."""

import multiprocessing
import time


def crunch(seconds: float) -> int:
    """Pure Python work until this process has used ``seconds`` of CPU time."""
    end = time.process_time() + seconds
    n = 0
    while time.process_time() < end:
        n += sum(i * i for i in range(200))
    return n


if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(2) as pool:
        done = pool.map(crunch, [0.5] * 4, chunksize=1)
    print(f"{len(done)} tasks done in the workers")
