"""A training loop that runs until it is stopped, started outside perfstack for ``perfstack
attach``: each step a batch is "loaded" (``load_batch``: 10 ms asleep, off the CPU) and
trained on (``train_step``: a torch MLP's forward, backward and update, ~10 ms on the CPU),
and the step count, with the seconds spent so far in each of the two, is written to the file
named by the first argument (a heartbeat: the loop ran on; and the truth, timed by hand, a
report must agree with: ``train_step`` is the hottest own code, about half the wall time
waits in ``load_batch``). With ``mark`` as its second argument each step is marked with
``perfstack.step()`` (a step is then the loop's, not each optimizer step's). Under torchrun
each rank is such a loop, its heartbeat the file's name and ``.RANK``."""

import os
import sys
import time

import torch


def load_batch(x: torch.Tensor) -> torch.Tensor:
    time.sleep(0.010)  # a slow loader: the main thread waits, off the CPU
    return x


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
               y: torch.Tensor) -> None:
    end = time.perf_counter() + 0.010
    while time.perf_counter() < end:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    beat = sys.argv[1] + (f".{os.environ['RANK']}" if "RANK" in os.environ else "")
    mark = sys.argv[2:] == ["mark"]
    if mark:
        import perfstack
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 8, (64,))
    steps, loading, training = 0, 0.0, 0.0
    while True:
        began = time.perf_counter()
        batch = load_batch(x)
        loaded = time.perf_counter()
        train_step(model, opt, batch, y)
        loading += loaded - began
        training += time.perf_counter() - loaded
        steps += 1
        if mark:
            perfstack.step()
        with open(beat + ".tmp", "w") as fh:
            fh.write(f"{steps} {loading:.6f} {training:.6f} {time.time():.6f}")
        os.replace(beat + ".tmp", beat)
