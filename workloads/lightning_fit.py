"""A ``lightning`` Trainer's fit of a small regression model on random data: Lightning's own
loop, where forward and backward run inside the optimizer's step (its closure).

    python workloads/lightning_fit.py --max-steps 20
    perfstack run --steps 10 workloads/lightning_fit.py

Every training step is Lightning's ``optimizer.step(closure)``: the closure runs
``training_step`` (the forward pass and the loss) and the backward pass, then Adam updates the
weights; the batches come from a DataLoader in the main process (``--workers`` for more).
"""

from __future__ import annotations

import argparse
import logging
import time

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

try:  # the workloads run without perfstack too
    import perfstack
except ImportError:  # pragma: no cover - perfstack is installed wherever the tests run
    perfstack = None  # type: ignore[assignment]


class Regressor(L.LightningModule):
    """A three-layer MLP trained with Adam on a mean-squared error."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                 nn.ReLU(), nn.Linear(hidden, 1))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def main() -> None:
    """Fit for ``--max-steps`` steps; print the throughput."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--accumulate", type=int, default=1,
                   help="batches whose gradients one optimizer step sums")
    p.add_argument("--val-every", type=int, default=0,
                   help="a validation loop every N training batches (0: none)")
    p.add_argument("--val-batches", type=int, default=20, help="batches of each validation")
    args = p.parse_args()
    logging.getLogger("lightning").setLevel(logging.ERROR)
    torch.manual_seed(0)
    samples = args.batch_size * args.max_steps * args.accumulate
    data = TensorDataset(torch.randn(samples, args.width), torch.randn(samples, 1))
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=args.workers)
    val = None
    validate: dict[str, object] = {"limit_val_batches": 0}
    if args.val_every:
        held = args.batch_size * args.val_batches
        val = DataLoader(TensorDataset(torch.randn(held, args.width), torch.randn(held, 1)),
                         batch_size=args.batch_size)
        validate = {"val_check_interval": args.val_every, "num_sanity_val_steps": 0}
    trainer = L.Trainer(max_steps=args.max_steps, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accumulate_grad_batches=args.accumulate,
                        **validate)  # type: ignore[arg-type]
    start = time.perf_counter()
    trainer.fit(Regressor(args.width, args.hidden), loader, val)
    elapsed = time.perf_counter() - start
    rate = trainer.global_step * args.accumulate * args.batch_size / elapsed
    print(f"{trainer.global_step} steps in {elapsed:.2f} s")
    print(f"throughput: {rate:.2f} samples/s")
    if perfstack is not None:
        perfstack.report_metric("throughput", rate, "samples/s", "higher")


if __name__ == "__main__":
    main()
