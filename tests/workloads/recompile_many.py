"""30 functions made from one source (one name, file and line: three dozen closures a code
generator would make), each compiled to dynamo's recompile limit by a new shape every call:
270 compiles, 30 frames at their limit."""

import torch

torch._dynamo.config.automatic_dynamic_shapes = False
SOURCE = "def f(x):\n    return torch.sin(x) * 2\n"

if __name__ == "__main__":
    fns = []
    for _ in range(30):
        space = {"torch": torch}
        exec(compile(SOURCE, __file__, "exec"), space)
        fns.append(torch.compile(space["f"], backend="eager"))
    for n in range(1, 12):
        x = torch.randn(n)
        for f in fns:
            f(x)
