"""A plain training loop that evaluates once between its steps, and later trains two steps
with the model kept in eval mode (its batch norm frozen): the first is an evaluation, the
second is training (tests/test_frameworks.py)."""

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.BatchNorm1d(256),
                            torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def train_step() -> None:
    x, y = torch.randn(128, 64), torch.randint(0, 10, (128,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def evaluate() -> None:
    model.eval()
    with torch.no_grad():
        for _ in range(40):
            model(torch.randn(512, 64))
    model.train()


for step in range(1, 11):
    frozen = step in (7, 8)
    if frozen:
        model.eval()
    train_step()
    if frozen:
        model.train()
    if step == 4:
        evaluate()
