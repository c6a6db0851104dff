"""A small compiled training loop over six batch sizes, the shape of issue 72's loops:
``--break`` puts one graph break in the model, ``--dynamic`` compiles with dynamic=True.

Its compiling holds most of its wall time (py-spy --idle on its main thread: 3.45 s of
5.4 s inside torch.compile, 1.1 s of it waiting for the C++ compiler it spawned), which is
what the time budget must say (tests/test_compile_waits.py)."""

import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--break", dest="graph_break", action="store_true")
parser.add_argument("--dynamic", action="store_true")
parser.add_argument("--steps", type=int, default=60)
args = parser.parse_args()


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(256, 512)
        self.b = torch.nn.Linear(512, 256)
        self.c = torch.nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.a(x))
        if args.graph_break:
            torch._dynamo.graph_break()
        x = torch.relu(self.b(x))
        return self.c(x)


def main() -> None:
    """Compile inside a function, as a training script does: the compiler's import at
    torch.compile's first call is then made from the workload's own function."""
    torch.manual_seed(0)
    net = Net()
    model = torch.compile(net, dynamic=True if args.dynamic else None)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    sizes = [32, 48, 64, 96, 128, 160]
    for i in range(args.steps):
        x = torch.randn(sizes[i % 6], 256)
        y = torch.randint(0, 10, (sizes[i % 6],))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


main()
