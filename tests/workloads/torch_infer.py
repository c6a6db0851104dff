"""An inference loop that marks its steps with perfstack.step() (no optimizer); it says at
its end whether torch's compiler stack was imported (it compiles nothing)."""

import sys

import torch

import perfstack


def predict(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(batch)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    batch = torch.randn(32, 64)
    for _ in range(8):
        predict(model, batch)
        perfstack.step()
    print(f"imported: dynamo {'torch._dynamo' in sys.modules}, "
          f"inductor {'torch._inductor' in sys.modules}; "
          f"torch's own lazy attributes: {torch.__getattr__.__qualname__ == '__getattr__'}")
