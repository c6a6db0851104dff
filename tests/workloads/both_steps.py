"""A training loop that calls both ``opt.step()`` and ``perfstack.step()`` once a batch: each
batch is one step, the first included. Prints how many batches it finished."""

import torch

import perfstack

if __name__ == "__main__":
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    done = 0
    try:
        for _ in range(1000):
            loss = model(torch.randn(4, 8)).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            done += 1
            perfstack.step()
    finally:
        print(f"finished {done} batches")
