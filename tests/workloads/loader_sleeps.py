"""A DataLoader-bound loop: each sample costs CPU (a decode) and I/O (a sleep, 3 ms); the
model step is small. Prints its own timer's share of the loop's time spent waiting for
batches (about 89% here), which the report's DataLoader share must agree with (issue 72:
py-spy's running samples alone said 34%)."""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--io-ms", type=float, default=3.0)
p.add_argument("--cpu", type=int, default=1000)
p.add_argument("--steps", type=int, default=30)
a = p.parse_args()


class Slow(Dataset):
    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        acc = 0
        for k in range(a.cpu):  # decode
            acc += k * i % 13
        time.sleep(a.io_ms / 1000)  # read
        return torch.full((64,), float(acc % 7)), i % 10


model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Slow(), batch_size=16)
waited = 0.0
start = time.perf_counter()
it = iter(loader)
for _ in range(a.steps):
    t = time.perf_counter()
    x, y = next(it)
    waited += time.perf_counter() - t
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
total = time.perf_counter() - start
print(f"loader share {100 * waited / total:.1f}% of the loop ({waited:.2f} s of {total:.2f} s)")
