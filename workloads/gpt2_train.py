"""GPT-2 from Hugging Face ``transformers`` trained with AdamW on random tokens: a real
model's training loop, random weights, nothing downloaded.

    python workloads/gpt2_train.py --steps 20
    perfstack run --steps 3 workloads/gpt2_train.py

The model is GPT-2's architecture at a small size (``--layers 4 --width 256``, about 12 M
parameters with the default vocabulary); each step is a forward pass with the language-model
loss, a backward pass and an AdamW step (an optimizer step: perfstack counts it). AdamW runs
its per-parameter loop unless ``--foreach`` or ``--fused`` is given.
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

try:  # the workloads run without perfstack too
    import perfstack
except ImportError:  # pragma: no cover - perfstack is installed wherever the tests run
    perfstack = None  # type: ignore[assignment]


def main() -> None:
    """Train for ``--steps`` steps; print the step time and the throughput."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=8192)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--foreach", action="store_true", help="AdamW(foreach=True)")
    group.add_argument("--fused", action="store_true", help="AdamW(fused=True)")
    args = p.parse_args()
    torch.manual_seed(0)
    config = GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=args.heads,
                        vocab_size=args.vocab, n_positions=args.seq_len,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    model.train()
    how = {"foreach": True} if args.foreach else {"fused": True} if args.fused else {
        "foreach": False}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **how)
    tokens = torch.randint(0, args.vocab, (args.batch_size, args.seq_len))
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    elapsed = time.perf_counter() - start
    rate = args.steps * args.batch_size / elapsed
    print(f"{args.steps} steps, {elapsed / args.steps * 1e3:.1f} ms/step, loss {loss.item():.3f}")
    print(f"throughput: {rate:.2f} samples/s")
    if perfstack is not None:
        perfstack.report_metric("throughput", rate, "samples/s", "higher")


if __name__ == "__main__":
    main()
