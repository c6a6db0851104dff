"""A small model trained under ``torch.compile``, whose compile story is known from its source.

    python workloads/compiled.py                      # 24 steps, batch sizes 16, 24, ..., 56
    python workloads/compiled.py --no-break           # the same without the graph break
    python workloads/compiled.py --device cuda        # Triton kernels on a GPU

What torch.compile does here, by default (its automatic dynamic shapes):

- **One graph break**, in ``Net.forward`` at the line marked ``GRAPH BREAK``: ``.item()``
  turns a tensor into a Python number, which dynamo cannot trace (unless
  ``capture_scalar_outputs``), so ``forward`` compiles as two frames: ``forward`` up to the
  break, and the resume function after it (``torch_dynamo_resume_in_forward_at_<line>``).
  With ``--no-break`` the branch is a tensor operation (``torch.where``) and no break is
  made: one frame.
- **One recompile of each frame**, from the batch size: the first batch (16) compiles with a
  static shape; the second (24) fails the guard on dimension 0 ("size mismatch at index 0"),
  and the frame compiles again with that dimension dynamic, which every later size reuses.
  ``--batch-sizes 16`` (one size) makes no recompile; ``--dynamic`` compiles dynamic from
  the start (no recompile either).

The batch size cycles through ``--batch-sizes`` one step at a time; each step is a forward,
a backward and an SGD step (one perfstack step).
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

try:  # the workloads run without perfstack too
    import perfstack
except ImportError:  # pragma: no cover - perfstack is installed wherever the tests run
    perfstack = None  # type: ignore[assignment]


class Net(nn.Module):
    """Two linear layers with a data-dependent branch between them."""

    def __init__(self, width: int, hidden: int, graph_break: bool) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)
        self.graph_break = graph_break

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        if self.graph_break:
            if h.mean().item() > 0.1:  # GRAPH BREAK: a tensor read as a Python number
                h = h * 2.0
        else:
            h = torch.where(h.mean() > 0.1, h * 2.0, h)
        return self.fc2(h)


def main() -> None:
    """Train for ``--steps`` steps and print the step time and the compile count."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--batch-sizes", default="16,24,32,40,48,56",
                   help="the batch sizes, one step each in turn (default 16,24,...,56)")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--no-break", action="store_true", help="no graph break in forward")
    p.add_argument("--dynamic", action="store_true", help="torch.compile(dynamic=True)")
    p.add_argument("--backend", default="inductor",
                   help="torch.compile's backend (inductor; aot_eager compiles faster)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = Net(args.width, args.hidden, graph_break=not args.no_break).to(device)
    compiled = torch.compile(model, backend=args.backend, dynamic=True if args.dynamic else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = {n: (torch.randn(n, args.width, device=device), torch.randn(n, args.width,
                                                                        device=device))
            for n in sizes}
    start = time.perf_counter()
    samples = 0
    for i in range(args.steps):
        x, y = data[sizes[i % len(sizes)]]
        samples += len(x)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
        if args.device == "cuda":
            torch.cuda.synchronize()
        if perfstack is not None:
            perfstack.step()
    elapsed = time.perf_counter() - start
    print(f"{args.steps} steps in {elapsed:.2f} s ({elapsed / args.steps * 1e3:.1f} ms/step, "
          "compiling included)")
    print(f"throughput: {samples / elapsed:.2f} samples/s")
    if perfstack is not None:
        perfstack.report_metric("throughput", samples / elapsed, "samples/s", "higher")


if __name__ == "__main__":
    main()
