"""Small GPU training loops whose bottleneck is known from their source, for checking
perfstack's GPU verdict against a truth measured by hand (docs/accuracy.md).

    python workloads/gpu_loops.py --loop gemm      # device-bound: a chain of bf16 GEMMs
    python workloads/gpu_loops.py --loop copy      # copy-bound: 256 MiB from pageable memory
    python workloads/gpu_loops.py --loop copy --pinned   # the same from pinned memory
    python workloads/gpu_loops.py --loop sync      # sync-bound: 16 reads of a product a step
    python workloads/gpu_loops.py --loop reads     # launch-bound: 300 tiny reads a step
    python workloads/gpu_loops.py --loop autocast  # a GPT-2-shaped model under bf16 autocast
    python workloads/gpu_loops.py --loop launch    # launch-bound: many tiny kernels
    python workloads/gpu_loops.py --loop gemm --truth   # the truth, measured by hand

``--truth`` runs the loop without perfstack and prints one JSON object: the step time with the
device synchronised at the window's ends, the device time a step (torch.profiler's own
kernels and copies, summed), and the loop's own figure (achieved TFLOP/s, the copy's GB/s,
the synchronisations' share of the step: the loop timed again without them).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch

try:  # the workloads run without perfstack too
    import perfstack
except ImportError:  # pragma: no cover - perfstack is installed wherever the tests run
    perfstack = None  # type: ignore[assignment]


def _gemm(device: str) -> Callable[[], None]:
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)

    def step() -> None:
        x = a
        for _ in range(8):
            x = torch.mm(x, b)
            x = x * (1.0 / 90.0)  # keeps the values finite, a sliver of element-wise work
    return step


def _copy(device: str, pinned: bool) -> Callable[[], None]:
    host = torch.randn(64 << 20)  # 256 MiB of fp32
    if pinned:
        host = host.pin_memory()
    w = torch.randn(1024, device=device, requires_grad=True)
    opt = torch.optim.SGD([w], lr=1e-3)

    def step() -> None:
        x = host.to(device, non_blocking=pinned)
        loss = (x[:1 << 20].view(-1, 1024) @ w).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def _sync(device: str, reads: int = 16) -> Callable[[], None]:
    """Each read waits for a product, then the host does its own work while the device
    idles: without the reads the host's work would overlap the device's."""
    n = 4096 if device.startswith("cuda") else 256
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)

    def step(read: bool = True) -> None:
        total = 0.0
        for _ in range(reads):
            y = torch.mm(a, a)  # about 0.2 ms on an H200
            total += float(y[0, 0]) if read else 0.0  # the host waits for the product
            total += sum(i * i for i in range(8000)) * 1e-12  # the host's own work, ~0.4 ms
    return step


def _reads(device: str, reads: int = 300) -> Callable[[], None]:
    """Many reads of tiny values, each after a tiny kernel: the host's launches, not the
    reads, bound it (without the reads it is no faster: the truth's sync_share)."""
    model = torch.nn.Linear(256, 256).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256, device=device)

    def step(read: bool = True) -> None:
        y = model(x)
        total = 0.0
        for i in range(reads):
            v = y[i % 64, i % 256].detach() * 2
            total += float(v) if read else 0.0  # a device-to-host read: the host waits
        loss = y.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def _autocast(device: str) -> Callable[[], None]:
    layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True, norm_first=True)
    model = torch.nn.TransformerEncoder(layer, 6).to(device)
    head = torch.nn.Linear(768, 8192).to(device)
    opt = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=1e-4)
    x = torch.randn(16, 512, 768, device=device)
    target = torch.randint(0, 8192, (16, 512), device=device)

    def step() -> None:
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16):
            logits = head(model(x))
            loss = torch.nn.functional.cross_entropy(logits.float().view(-1, 8192),
                                                     target.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def _launch(device: str) -> Callable[[], None]:
    model = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(24)]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, 32, device=device)

    def step() -> None:
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def make(loop: str, device: str, pinned: bool = False) -> Callable[[], None]:
    """The loop's step."""
    if loop == "gemm":
        return _gemm(device)
    if loop == "copy":
        return _copy(device, pinned)
    if loop == "sync":
        return _sync(device)
    if loop == "reads":
        return _reads(device)
    if loop == "autocast":
        return _autocast(device)
    return _launch(device)


def _synced(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


#: Steps the truth's own profile covers (perfstack's runs measure 10).
PROFILED = 10


def _sm_clock(device: str) -> int | None:
    """The device's SM clock now (MHz), where NVML answers: a GEMM's time follows it, and
    a card at its power limit lowers it within a few steps."""
    if not device.startswith("cuda"):
        return None
    try:
        return int(torch.cuda.clock_rate())
    except Exception:  # no NVML: the clock is unknown
        return None


def _timed(step: Callable[[], None], steps: int, device: str) -> float:
    """Seconds a step, the device synchronised at the window's two ends."""
    _synced(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    _synced(device)
    return (time.perf_counter() - start) / steps


def truth(loop: str, device: str, steps: int, pinned: bool) -> dict[str, object]:
    """The loop's figures measured by hand: synchronised step time, the device's own time a
    step from torch.profiler's events, and the loop's own figure."""
    from torch.profiler import ProfilerActivity, profile

    step = make(loop, device, pinned)
    for _ in range(3):
        step()
    out: dict[str, object] = {"loop": loop, "pinned": pinned, "steps": steps,
                              "step_s": _timed(step, steps, device)}
    clock = _sm_clock(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED):
            step()
        _synced(device)
    out["sm_clock_mhz"] = [clock, _sm_clock(device)]  # at the profiled window's two ends
    # the device's own activities (kernels, copies, fills), each once: an op's aggregate also
    # carries its kernels' time, and a step's range on the device spans others' work
    activities = [e for e in prof.events() if e.device_type != torch.autograd.DeviceType.CPU
                  and not e.is_user_annotation and not e.name.startswith("ProfilerStep")]
    device_us = sum(e.time_range.elapsed_us() for e in activities)
    out["device_s_per_step"] = device_us / 1e6 / PROFILED
    out["device_activities"] = len(activities)
    out["device_busy"] = min(1.0, float(out["device_s_per_step"]) / float(out["step_s"]))
    if loop == "gemm":
        out["tflop_s"] = 8 * 2 * 8192 ** 3 / float(out["step_s"]) / 1e12
    if loop == "copy":
        host = torch.randn(64 << 20)
        host = host.pin_memory() if pinned else host
        out["copy_s"] = _timed(lambda: host.to(device, non_blocking=pinned), steps, device)
        out["copy_gb_s"] = (256 << 20) / float(out["copy_s"]) / 1e9
    if loop in ("sync", "reads"):
        no_reads = _sync(device) if loop == "sync" else _reads(device)
        out["step_without_reads_s"] = _timed(lambda: no_reads(False), steps, device)
        out["sync_share"] = 1 - float(out["step_without_reads_s"]) / float(out["step_s"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loop", choices=("gemm", "copy", "sync", "reads", "autocast", "launch"),
                        default="gemm")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--pinned", action="store_true", help="copy from pinned memory")
    parser.add_argument("--truth", action="store_true",
                        help="measure the loop by hand and print it as JSON")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.truth:
        print(json.dumps(truth(args.loop, args.device, args.steps, args.pinned)))
        return
    step = make(args.loop, args.device, args.pinned)
    _synced(args.device)
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
        if perfstack is not None and args.loop in ("gemm", "sync"):  # no optimizer: mark the step
            perfstack.step()
    _synced(args.device)
    rate = args.steps / (time.perf_counter() - start)
    print(f"throughput: {rate:.2f} steps/s ({args.loop} loop on {args.device})")
    if perfstack is not None:
        perfstack.report_metric("throughput", rate, "steps/s", "higher")


if __name__ == "__main__":
    main()
