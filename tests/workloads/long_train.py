"""A long training loop (100,000 optimizer steps unless told otherwise): under
``perfstack run --steps`` every run must end after its steps, cleanly, with this script's
``finally`` run."""

import sys

import torch

if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 8, (32,))
    done = 0
    try:
        for _ in range(steps):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            done += 1
    finally:
        print(f"finally: {done} steps done")
