"""A compiled function called with a Python number that changes every call: dynamo guards on
the number, compiles again for each (8 times, its recompile limit), then gives up and runs
the function eagerly from then on, silently."""

import torch


@torch.compile(backend="eager", dynamic=False)
def scale(x: torch.Tensor, k: int) -> torch.Tensor:
    return x * k


if __name__ == "__main__":
    x = torch.randn(8)
    for k in range(12):
        scale(x, k)
    print("done")
