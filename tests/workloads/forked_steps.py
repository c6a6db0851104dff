"""Forked multiprocessing workers call perfstack.step() (a library that marks its own steps,
say) while the main process marks the real ones: only the main process's steps count."""

import multiprocessing

import perfstack


def work(n: int) -> int:
    for _ in range(20):
        perfstack.step()
    return n * n


if __name__ == "__main__":
    done = 0
    with multiprocessing.get_context("fork").Pool(2) as pool:
        try:
            for _ in range(10):
                pool.map(work, range(4))
                done += 1
                perfstack.step()
        finally:
            print(f"finished {done} batches")
