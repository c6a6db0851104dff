"""A torch script with no steps at all: the whole run is profiled."""

import torch


def compute() -> torch.Tensor:
    a = torch.randn(128, 128)
    return (a @ a).relu().sum()


if __name__ == "__main__":
    for _ in range(3):
        compute()
