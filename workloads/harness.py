"""The benchmark harness every model workload shares, with the DLBS pytorch_benchmarks flags.

    python workloads/benchmark.py --model resnet50 --batch-size 4 --num-batches 5
    python workloads/resnet50.py --forward-only --dtype bfloat16

It trains (or with ``--forward-only`` infers) on synthetic data, times ``--num-batches``
batches after ``--num-warmup-batches`` untimed ones, and prints the throughput in samples/s.
Under perfstack it also reports the throughput as a metric and marks each batch as a step.
Under torchrun (WORLD_SIZE > 1) the model is wrapped in DistributedDataParallel (gloo on CPU,
nccl on GPU) and the throughput is the sum over ranks, reported by rank 0.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence

import torch
from models import MODELS, build

try:  # the workloads run without perfstack too
    import perfstack
except ImportError:  # pragma: no cover - perfstack is installed wherever the tests run
    perfstack = None  # type: ignore[assignment]

DTYPES = {"float": torch.float32, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}


def _bool(text: str) -> bool:
    return text.lower() in ("1", "true", "yes", "on")


def parser(default_model: str | None = None) -> argparse.ArgumentParser:
    """Return the harness's argument parser (DLBS names, with dashes or underscores)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default=default_model, choices=MODELS, required=not default_model)
    p.add_argument("--batch-size", "--batch_size", type=int, default=None,
                   help="per-device batch size (default: per model)")
    p.add_argument("--num-batches", "--num_batches", type=int, default=5)
    p.add_argument("--num-warmup-batches", "--num_warmup_batches", type=int, default=1)
    p.add_argument("--device", default="cpu", choices=["cpu", "gpu", "cuda"])
    p.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    p.add_argument("--forward-only", "--forward_only", nargs="?", const=True, default=False,
                   type=_bool, help="inference instead of training")
    p.add_argument("--cudnn-benchmark", "--cudnn_benchmark", nargs="?", const=True, default=True,
                   type=_bool)
    p.add_argument("--image-size", type=int, default=64, help="resnet50 input size (real: 224)")
    p.add_argument("--channels-last", action="store_true",
                   help="resnet50 in the channels-last memory layout (NHWC)")
    p.add_argument("--hidden", type=int, default=256, help="bert/mlp width (BERT-base: 768)")
    p.add_argument("--layers", type=int, default=2, help="bert encoder layers (BERT-base: 12)")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--vocab", type=int, default=8192, help="bert vocabulary (BERT: 30522)")
    p.add_argument("--grid", type=int, default=24, help="deepwave grid points per side")
    p.add_argument("--time-steps", type=int, default=12, help="deepwave time steps")
    return p


def repeat(step: Callable[[], object], iterations: int) -> float:
    """Run ``step`` ``iterations`` times as steps; print and report iterations/s, return it.

    The loop of the one-kernel units: each iteration is one perfstack step.
    """
    start = time.perf_counter()
    for _ in range(iterations):
        step()
        if perfstack is not None:
            perfstack.step()
    rate = iterations / (time.perf_counter() - start)
    print(f"throughput: {rate:.2f} iterations/s")
    if perfstack is not None:
        perfstack.report_metric("throughput", rate, "iterations/s", "higher")
    return rate


DEFAULT_BATCH = {"resnet50": 4, "bert": 8, "deepwave": 1, "cifar100": 32, "mlp": 64}


def main(argv: Sequence[str] | None = None, default_model: str | None = None,
         **defaults: object) -> float:
    """Run the benchmark; print and report the throughput (samples/s) and return it."""
    p = parser(default_model)
    p.set_defaults(**defaults)
    args = p.parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    use_gpu = args.device in ("gpu", "cuda")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if use_gpu else \
        torch.device("cpu")
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    torch.manual_seed(0)
    spec = build(args.model, args, device, DTYPES[args.dtype])
    model = spec.model
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("nccl" if use_gpu else "gloo")
        model = torch.nn.parallel.DistributedDataParallel(model)
    batch = args.batch_size or DEFAULT_BATCH[args.model]
    inputs, targets = spec.batch(batch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.train(not args.forward_only)

    def one_batch() -> None:
        if args.forward_only:
            with torch.no_grad():
                model(inputs)
        else:
            opt.zero_grad(set_to_none=True)
            spec.loss(model(inputs), targets).backward()
            opt.step()
        if use_gpu:
            torch.cuda.synchronize(device)
        if perfstack is not None:
            perfstack.step()  # one step per batch: profiler windows, joules per step

    for _ in range(args.num_warmup_batches):
        one_batch()
    start = time.perf_counter()
    for _ in range(args.num_batches):
        one_batch()
    elapsed = time.perf_counter() - start
    throughput = args.num_batches * batch * world / elapsed
    if world > 1:
        import torch.distributed as dist

        # torch 2.13 can deadlock when DDP's Reducer (the last owner of the gloo process
        # group) is freed while a gloo worker thread still destroys a finished work item: the
        # main thread holds the GIL and waits for the group's mutex, the worker holds the mutex
        # and waits for the GIL (seen under the torch profiler, whose thread-local state holds
        # Python objects). So: wait for every rank, give the workers time (sleep releases the
        # GIL) to drop their finished work, then free the model while nothing is pending.
        dist.barrier()
        time.sleep(0.2)
        del model, opt
        dist.destroy_process_group()
    if rank == 0:
        mode = "inference" if args.forward_only else "training"
        print(f"{args.model} {mode} {args.dtype} batch {batch} x {world} rank(s): "
              f"{elapsed / args.num_batches * 1e3:.1f} ms/batch")
        print(f"throughput: {throughput:.2f} samples/s")
        if perfstack is not None:
            perfstack.report_metric("throughput", throughput, "samples/s", "higher")
    return throughput
