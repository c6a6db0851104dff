"""Large matrix products: the time is in native code that releases the GIL."""

import torch


def multiply(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


if __name__ == "__main__":
    torch.manual_seed(0)
    a, b = torch.randn(768, 768), torch.randn(768, 768)
    for _ in range(60):
        multiply(a, b)
