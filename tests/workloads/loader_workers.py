"""A training loop fed by two DataLoader workers whose ``__getitem__`` is slow Python: the
workers keep CPUs busy while the main process's torch ops want its intra-op threads."""

import argparse

import torch
from torch.utils.data import DataLoader, Dataset

import perfstack


class Slow(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Each item costs ~1 ms of pure Python (an augmentation written in Python, say)."""

    def __len__(self) -> int:
        return 512

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        s = 0
        for k in range(20000):
            s += k * i % 7
        return torch.randn(64), torch.tensor(s % 10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    for x, y in DataLoader(Slow(), batch_size=32, num_workers=args.workers):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        perfstack.step()
    print("trained")
