"""One workload per finding rule, chosen with ``--mode``; each does the thing the rule is for.

- ``tiny-ops``: thousands of ops on 4-element tensors per step (dispatch-bound, small ops)
- ``sleepy``: sleeps most of each step (the main thread waits)
- ``threads``: asks torch for 4x as many threads as there are CPUs (oversubscribed)
- ``faults``: allocates and frees 32 MiB buffers, touching every page (page-fault rate)
- ``loader``: a DataLoader whose dataset is slow, loaded in the main process
"""

import argparse
import os
import time

import torch

import perfstack


def tiny_ops(steps: int) -> None:
    x = torch.ones(4)
    for _ in range(steps):
        for _ in range(1500):
            x = x * 1.0001 + 0.0001
        perfstack.step()


def sleepy(steps: int) -> None:
    for _ in range(steps):
        time.sleep(0.06)
        sum(i * i for i in range(20_000))
        perfstack.step()


def threads(steps: int) -> None:
    torch.set_num_threads(4 * (os.cpu_count() or 1))
    a = torch.randn(512, 512)
    for _ in range(steps):
        torch.mm(a, a)
        perfstack.step()


def faults(steps: int) -> None:
    for _ in range(steps):
        for _ in range(4):
            buf = bytearray(32 << 20)  # mmap'd, zero pages: each touched page faults
            buf[::4096] = b"x" * len(buf[::4096])
            del buf
        perfstack.step()


class SlowDataset(torch.utils.data.Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, index: int) -> torch.Tensor:
        total = 0
        for i in range(20_000):
            total += i * index % 7
        return torch.full((8,), float(total))


def loader(steps: int) -> None:
    batches = torch.utils.data.DataLoader(SlowDataset(), batch_size=32, num_workers=0)
    model = torch.nn.Linear(8, 8)
    for step, batch in enumerate(batches):
        if step >= steps:
            break
        model(batch).sum()
        perfstack.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", required=True,
                        choices=("tiny-ops", "sleepy", "threads", "faults", "loader"))
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    {"tiny-ops": tiny_ops, "sleepy": sleepy, "threads": threads, "faults": faults,
     "loader": loader}[args.mode](args.steps)
