"""An inference loop that marks its steps with perfstack.step() (no optimizer).

Given a path, it writes there whether ``torch._inductor`` had been imported when the loop
ended (this script never uses it, so a profiler that imported it did so on its own) and
whether the script's own ``torch._inductor`` access still works.
"""

import json
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
    if len(sys.argv) > 1:
        imported = "torch._inductor" in sys.modules
        with open(sys.argv[1], "w", encoding="utf-8") as fh:
            json.dump({"inductor_imported": imported,
                       "own_access_works": hasattr(torch, "_inductor")}, fh)
