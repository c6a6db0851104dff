"""The work is done in two forked worker processes (as DataLoader workers do it) while the
main process waits for their results: each task burns a fixed amount of CPU time in
``crunch``, so the children's CPU time is about 2 s on any machine. Before the first step a
child process burns 0.3 s of CPU (a compiler run at the first call, say): the workers' time
is from the first step on, its time is not."""

import multiprocessing
import subprocess
import sys
import time

import perfstack


def crunch(seconds: float) -> int:
    """Pure Python work until this process has used ``seconds`` of CPU time."""
    end = time.process_time() + seconds
    n = 0
    while time.process_time() < end:
        n += sum(i * i for i in range(200))
    return n


if __name__ == "__main__":
    subprocess.run([sys.executable, "-c", "import time\nend = time.process_time() + 0.3\n"
                    "while time.process_time() < end: pass"], check=True)
    perfstack.step()  # the steps begin
    with multiprocessing.get_context("fork").Pool(2) as pool:
        done = pool.map(crunch, [0.5] * 4, chunksize=1)
    perfstack.step()
    print(f"{len(done)} tasks done in the workers")
