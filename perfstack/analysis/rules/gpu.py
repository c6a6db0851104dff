"""The GPU verdict as a finding: what bounds the steps (``perfstack.analysis.gpubound``), its
evidence and its fix. One finding, the first a GPU user reads: device-bound (which kernels
fill the step, how close to their type's roof), copy-bound (bytes, direction, pageable or
pinned, against the link), sync-bound (synchronisations a step, the host's time blocked,
which op and line), launch-bound (the device waits for launches), or a device that waits with
its work launched (``time.device-idle``)."""

from __future__ import annotations

from perfstack.analysis.gpubound import GpuBound, gpu_bound, profiler_idle
from perfstack.analysis.kernelnames import MATRIX_KINDS
from perfstack.analysis.panes.kernels import kernel_view
from perfstack.report import Finding, Layer, Report
from perfstack.report.units import fmt_seconds, fmt_si, pct

#: The verdict's rules, each kind's.
RULES = {"device": "gpu.device-bound", "copy": "gpu.copy-bound", "sync": "gpu.sync-bound",
         "launch": "gpu.launch-bound", "waits": "time.device-idle"}
#: What the user wrote, for the ops that make the host wait.
SYNC_WORDS = {
    "aten::_local_scalar_dense": ".item(), float(t), int(t) or a printed tensor",
    "aten::item": ".item()",
    "aten::is_nonzero": "bool(t), if t:, while t:",
    "aten::nonzero": "nonzero() or indexing with a boolean mask (its size is the device's)",
    "aten::masked_select": "indexing with a boolean mask (its size is the device's)",
    "aten::copy_": ".cpu(), .to('cpu'), .tolist() or .numpy()",
    "aten::_to_copy": ".cpu(), .to('cpu'), .tolist() or .numpy()",
    "aten::to": ".cpu(), .to('cpu'), .tolist() or .numpy()",
}
SOURCE = "perfstack"


def _busy_title(b: GpuBound) -> str:
    return (f"busy {pct(b.busy)} of an unprofiled step" if profiler_idle(b)
            else f"busy {pct(b.busy)} of the profiled steps")


def _busy_words(b: GpuBound) -> str:
    if profiler_idle(b):
        return (f"the GPU is busy {pct(b.busy)} of an unprofiled step "
                f"({fmt_seconds(b.device_work_s or 0)} of device work a step, "
                f"{fmt_seconds(b.baseline_step_s or 0)} a step without the profiler: "
                f"step_time, from the baseline); {pct(b.busy_profiled)} under the profiler, "
                "which slowed the host")
    return f"the GPU is busy {pct(b.busy)} of the profiled steps (gpu_busy, from {b.source})"


def _beside(report: Report) -> list[str]:
    """What a sampler of the GPU's own counters read beside the trace, in a run of its own
    (``gpuN_util_gpu_mean``, ``gpuN_power_w_mean``): over the measured steps it tells the same
    story, busy is busy, and a device that waits draws little power."""
    out = []
    for m in report.metrics:
        if not m.name.startswith("gpu") or m.value is None:
            continue
        over = (m.description or "").rpartition(" mean over ")[2] or "its run"
        if m.name.endswith("_util_gpu_mean"):
            out.append(f"{m.name} {pct(float(m.value))} (from {m.source}, in its own run, over "
                       f"{over}; a sampled utilisation: the time some kernel ran, copies "
                       "not counted, not how full)")
        elif m.name.endswith("_power_w_mean"):
            out.append(f"{m.name} {float(m.value):.0f} W (from {m.source}, in its own run, over "
                       f"{over})")
    return out


def _sync_words(b: GpuBound) -> list[str]:
    """The host's synchronisations, where they hold a tenth of its step or more."""
    share, step, unprofiled = b.blocked()
    if share < 10:
        return []
    of = (f"{pct(share)} of a step without the profiler ({fmt_seconds(step or 0)}, step_time; "
          f"{pct(100 * (b.sync_s or 0) / b.step_s)} of the profiled "
          f"{fmt_seconds(b.step_s)})" if unprofiled and b.step_s
          else f"{pct(share)} of its {fmt_seconds(step or 0)} step")
    out = [f"{b.sync_calls or 0:.0f} synchronisations a step; the host blocked "
           f"{fmt_seconds(b.sync_s or 0)} a step in them: {of} (gpu_sync_calls, gpu_sync_time)"]
    for op in b.sync_ops:
        said = SYNC_WORDS.get(op.op)
        where = f" at {op.caller}" if op.caller else ""
        out.append(f"{op.key[:60]}{f' ({said})' if said else ''}{where}: {op.calls:,} calls, "
                   f"{fmt_seconds(op.seconds)} blocked over the profiled steps")
    return out


def _faster_types(report: Report) -> str:
    """The autocast advice this GPU can take: bf16 where it runs it, else fp16; TF32 where
    it has it."""
    ceilings = report.environment.get("ceilings")
    gpu = ceilings.get("gpu") if isinstance(ceilings, dict) else None
    peaks = gpu.get("peak_flops") if isinstance(gpu, dict) else None
    peaks = peaks if isinstance(peaks, dict) else {}
    if "bf16" in peaks or not peaks:
        advice = ("run it in bf16 (torch.autocast(device_type='cuda', "
                  "dtype=torch.bfloat16))")
    else:
        advice = ("run it in fp16 (torch.autocast(device_type='cuda', dtype=torch.float16) "
                  "with a GradScaler)")
    if "tf32" in peaks:
        advice += " or allow TF32 (torch.backends.cuda.matmul.allow_tf32 = True)"
    return advice


def _kernel_words(report: Report) -> list[str]:
    view = kernel_view(report, top=3)
    if view is None:
        return []
    kinds = ", ".join(f"{k.kind} {pct(100 * k.share)}" for k in view.kinds[:3])
    out = [f"its kernel time by kind: {kinds}"]
    if view.matrix_s > 0:
        out.append(f"tensor cores ran {pct(100 * view.tensor_core_s / view.matrix_s)} of the "
                   "GEMM, convolution and attention time (from the kernels' names)")
    return out


def _roof_words(report: Report) -> list[str]:
    """The heaviest ops on the device with their share of their own type's roof."""
    placed = []
    for row in report.layers.get(Layer.FRAMEWORK, []):
        roof = row.attrs.get("roofline")
        if not isinstance(roof, dict) or roof.get("device") != "gpu" \
                or row.attrs.get("cost_in_caller") or roof.get("roof_share") is None:
            continue
        placed.append((float(roof.get("seconds") or 0.0), row, roof))
    placed.sort(key=lambda p: -p[0])
    return [f"{str(row.attrs.get('op') or row.name)[:50]}: {pct(float(roof['roof_share']))} "
            f"of the {'memory' if roof.get('bound') == 'memory' else roof.get('peak_type') or '?'}"
            f" roof ({row.attrs.get('dtype') or '?'} inputs), {fmt_seconds(seconds)}"
            for seconds, row, roof in placed[:3]]


def _device(b: GpuBound, report: Report) -> Finding:
    view = kernel_view(report, top=1)
    top = view.kinds[0].kind if view is not None and view.kinds else None
    if view is not None and view.matrix_s > 0 and view.tensor_core_s < 0.5 * view.matrix_s \
            and top in MATRIX_KINDS:
        action = f"the matrix work runs off the tensor cores: {_faster_types(report)}"
    elif top in MATRIX_KINDS:
        action = ("the device is the limit and its matrix work is what it does: fewer FLOPs "
                  "(a smaller model, FlashAttention for attention), a lower precision (fp8 "
                  "where the model allows) or more devices; check each op's share of its "
                  "roof below")
    else:
        action = ("the device is busy with memory-bound kernels (element-wise, reductions): "
                  "fuse them (torch.compile), and keep the matrix work in bf16 on the tensor "
                  "cores")
    lead = (f"; {view.kinds[0].kind} {pct(100 * view.kinds[0].share)} of its kernel time"
            if view is not None and view.kinds else "")
    return Finding(RULES["device"], f"device-bound: its kernels keep the GPU {_busy_title(b)}"
                   f"{lead}", "kernel", "info",
                   [*_kernel_words(report), _busy_words(b), *_roof_words(report)], action,
                   SOURCE)


def _copy(b: GpuBound) -> Finding:
    evidence = [f"copies between host and device fill {pct(b.copy_share or 0)} of the "
                "profiled steps on the device (gpu_copy_share)"]
    if b.copy_bytes:
        evidence.append(f"{fmt_si(b.copy_bytes, 'B')} copied a step (gpu_copy_bytes)")
    for c in b.copies[:3]:
        rate = fmt_si(c.rate, "B/s") if c.rate is not None else "unknown"
        link = (f" against {fmt_si(c.link, 'B/s')} the link carries ({c.link_how})"
                if c.link else "")
        evidence.append(f"{c.direction} from {c.host or 'unsaid'} memory: {c.calls:,} copies, "
                        f"{fmt_seconds(c.seconds)} on the device at {rate}{link}")
    pageable = any(c.host == "pageable" for c in b.copies[:1])
    action = ("pin the host memory (DataLoader(pin_memory=True), tensor.pin_memory()) and "
              "copy with .to('cuda', non_blocking=True): a copy from pageable memory is "
              "staged by the driver, blocks the host and runs at a fraction of the link; "
              if pageable else "") + \
        ("prefetch the next batch on a side stream (torch.cuda.Stream) so copies overlap "
         "compute, and move less: keep data on the device, copy it in a smaller type")
    return Finding(RULES["copy"], f"copy-bound: copies between host and device fill "
                   f"{pct(b.copy_share or 0)} of the GPU's steps", "kernel", "warning",
                   evidence, action, SOURCE)


def _sync(b: GpuBound) -> Finding:
    words = _sync_words(b)
    evidence = [words[0], f"after them the device idled {pct(b.after_sync or 0)} of the steps "
                "until the host launched again (gpu_idle.after_sync)", *words[1:]]
    if b.sync_ops and not any(op.caller for op in b.sync_ops):
        evidence.append("your lines that made them: record Python stacks with the trace "
                        "(perfstack run --help names the option)")
    return Finding(
        RULES["sync"], f"sync-bound: the host waits for the GPU {b.sync_calls or 0:.0f} times a "
        f"step, and the GPU idles {pct(b.after_sync or 0)} of the step after", "framework",
        "warning", evidence,
        "keep values on the device and read them once a step: accumulate the loss in a tensor "
        "and log it every N steps, keep masks and counts as tensors (torch.where, not "
        "indexing by a boolean mask), and never print or .tolist() a tensor inside the loop",
        SOURCE)


#: A launch-bound verdict with no step timed without the profiler to hold it to.
UNHELD = ("no step timed without the profiler to hold this to: torch.profiler slows the host "
          "(1.7x to 3x on the H200's small-op loops), which reads as a device waiting for "
          "launches; a perfstack run's baseline (or analyze of its run folder) says")


def _launch(b: GpuBound) -> Finding:
    return Finding(
        RULES["launch"], f"launch-bound: the GPU waits for the host to launch "
        f"{pct(b.host_wait or 0)} of the profiled steps", "kernel", "warning",
        [_busy_words(b),
         f"idle before the next launch call was even made: {pct(b.host_wait or 0)} of the "
         "steps (gpu_idle.host_wait): the device waited for the host",
         *([UNHELD] if b.baseline_step_s is None else [])],
        "the host does not launch fast enough: capture the step in a CUDA graph "
        "(torch.compile(mode='reduce-overhead'), torch.cuda.graphs), fuse small ops "
        "(torch.compile), give each kernel more work (larger batches); the Python and "
        "data-loading time between launches is in the drill-down", SOURCE)


def _waits(b: GpuBound) -> Finding:
    return Finding(
        RULES["waits"], f"the GPU waits with its work launched: it is {_busy_title(b)}",
        "kernel", "warning",
        [*_sync_words(b)[:1], _busy_words(b),
         f"idle {pct(b.idle or 0)} of the steps, {pct(b.host_wait or 0)} of it before the "
         "next launch call was made (gpu_idle.host_wait)", *_sync_words(b)[1:]],
        "the device is idle though the launches were made: look for waits on other ranks "
        "(collectives), dependencies between streams and events, and synchronisations "
        "(.item(), .cpu(), cudaStreamSynchronize)", SOURCE)


def gpu_findings(report: Report) -> list[Finding]:
    """The GPU verdict, when a device's time was measured over steps: a finding for what
    bounds them (a busy device under ``DEVICE_BOUND`` with nothing else to blame is the
    idle-device finding)."""
    b = gpu_bound(report)
    if b is None:
        return []
    if b.kind == "device":
        found = _device(b, report)
    elif b.kind == "copy":
        found = _copy(b)
    elif b.kind == "sync":
        found = _sync(b)
    elif b.kind == "launch":
        found = _launch(b)
    elif b.busy < 50:
        found = _waits(b)
    else:
        return []
    found.evidence += _beside(report)
    return [found]
