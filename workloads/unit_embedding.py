"""One-kernel unit: an Embedding lookup, forward and backward (GVProf's bert unit).

A batch touches a few hundred of the vocabulary's rows, yet the dense weight gradient is
written in full: most of what embedding_dense_backward writes is zeros ("single zeros").

    python workloads/unit_embedding.py --iterations 20
"""

import argparse

import harness
import torch

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--tokens", type=int, default=512)
    args = p.parse_args()
    torch.manual_seed(0)
    emb = torch.nn.Embedding(args.vocab, args.dim)
    ids = torch.randint(0, args.vocab, (args.tokens,))

    def step() -> None:
        emb.zero_grad()
        emb(ids).sum().backward()

    harness.repeat(step, args.iterations)
