"""The out-of-memory post-mortem, on real deaths: a workload that keeps 20 MiB a step until
its own address-space limit (MemoryError) or a memory cgroup's limit (the kernel's OOM killer
sends SIGKILL) stops it, and one that asks for too much at once. The truth is the workload's
source: the line that allocates, 20 MiB a step."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from perfstack.analysis.rules.memory import died_of_memory
from perfstack.report import ExitInfo, Layer, Report, Row, RunInfo, RunRecord
from perfstack.report.files import load_report
from tests.conftest import ROOT, perfstack_env, perfstack_in

WORKLOAD = ROOT / "tests" / "workloads" / "grows_until_oom.py"
MIB = 1 << 20


def _line(text: str, workload: Path = WORKLOAD) -> int:
    """The line of the workload's source that holds ``text``."""
    lines = workload.read_text("utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _oom(report_path: Path) -> dict[str, object]:
    data = json.loads(report_path.read_text("utf-8"))
    found = [f for f in data["findings"] if f["rule"] == "run.out-of-memory"]
    assert len(found) == 1, [f["rule"] for f in data["findings"]]
    assert data["findings"][0]["rule"] == "run.out-of-memory"  # it leads
    return found[0]  # type: ignore[no-any-return]


def test_memory_kept_step_over_step_dies_of_memoryerror_at_its_line(tmp_path: Path) -> None:
    """The address space limited to 300 MiB more than the start: MemoryError in ``keep``;
    the answer leads with the line, the limit, and 20 MiB a step kept (the fix for a leak)."""
    done = perfstack_in(tmp_path, "run", "--plugins", "resources", "--repeat", "1",
                        "--warmup", "0", "-o", "r.json", str(WORKLOAD), "--", "300")
    assert done.code == 8, done.stderr
    where = f"{WORKLOAD}:{_line('kept.append(')} in keep"
    assert f"The workload failed: out of memory at {where}." in " ".join(done.stdout.split())
    found = _oom(tmp_path / "r.json")
    assert found["title"] == f"out of memory at {where}"
    evidence = found["evidence"]
    assert isinstance(evidence, list)
    assert evidence[0].startswith("MemoryError: an allocation was refused under its "
                                  "address-space limit (ulimit -v), ")
    assert "(+20 MiB a step): a floor that rises is memory kept across steps" in evidence[2]
    assert str(found["action"]).startswith("something kept across steps holds memory")
    report = load_report(tmp_path / "r.json")
    for run in report.run.runs:
        assert run.memory is not None and run.memory["oom_killed"] is not True
        steps = run.memory["step_rss_bytes"]
        rises = [b - a for a, b in itertools.pairwise(steps)]
        assert rises and all(abs(r - 20 * MIB) < 2 * MIB for r in rises), rises


def test_one_allocation_too_big_is_not_called_a_leak(tmp_path: Path) -> None:
    """Three steps that keep nothing, then twice the limit at once: the line of that
    allocation, and the fix for a part of the work too big, not for memory kept."""
    done = perfstack_in(tmp_path, "run", "--plugins", "resources", "--repeat", "1",
                        "--warmup", "0", "-o", "r.json", str(WORKLOAD), "--", "300", "once")
    assert done.code == 8, done.stderr
    found = _oom(tmp_path / "r.json")
    line = _line("return bytearray(2 * limit_mib")
    assert found["title"] == f"out of memory at {WORKLOAD}:{line} in all_at_once"
    assert str(found["action"]).startswith("one part of the work needs more memory")
    assert not any("rising step over step" in e for e in found["evidence"])  # type: ignore[attr-defined]


def test_what_a_memory_profiler_saw_held_it_is_named(tmp_path: Path) -> None:
    """With memray's run (which dies of the same MemoryError, --keep-going): the finding
    names what held the most at memray's peak, ``keep``, ~280 MiB (14 steps of 20 MiB)."""
    done = perfstack_in(tmp_path, "run", "--plugins", "memray", "--keep-going", "--repeat",
                        "1", "--warmup", "0", "-q", "-o", "r.json", str(WORKLOAD), "--", "300")
    assert done.code == 8, done.stderr
    found = _oom(tmp_path / "r.json")
    held = next(e for e in found["evidence"]  # type: ignore[attr-defined]
                if e.startswith("what held the most at its peak: "))
    assert held.startswith(f"what held the most at its peak: keep ({WORKLOAD}:")
    assert held.endswith(" (memray)")
    size = held.split(") ", 1)[1].split(",")[0]
    assert size.endswith(" MiB") and 200 < float(size.split()[0]) <= 300, held
    assert "names the allocations" not in str(found["action"])  # named already


ADAM = ROOT / "tests" / "workloads" / "adam_fills_device.py"


def test_a_torch_model_out_of_host_memory_says_what_kind_of_tensor_held_it(
        tmp_path: Path) -> None:
    """torch's CPU allocator refusing a batch under an address-space limit (a RuntimeError,
    not a MemoryError) is out of memory, at the line that asked; the bootstrap's walk of the
    live tensors then gives their kinds, as the workload's source says them (8 layers of
    2048x2048 float32: parameters 128 MiB, gradients 128 MiB, Adam's two moments 256 MiB and
    its step counters, 128 MiB a batch held), and the model's state filling most of them
    gives its largest kind's fix."""
    done = perfstack_in(tmp_path, "run", "--plugins", "resources", "--repeat", "1",
                        "--warmup", "0", "-o", "r.json", str(ADAM), "--", "--device", "cpu",
                        "--width", "2048", "--model-gib", "0.125", "--batch-gib", "0.125",
                        "--limit-mib", "900")
    assert done.code == 8, done.stderr
    found = _oom(tmp_path / "r.json")
    assert found["title"] == f"out of memory at {ADAM}:{_line('held.append(', ADAM)} in hold"
    evidence = found["evidence"]
    assert isinstance(evidence, list)
    assert evidence[0].startswith("torch's CPU allocator refused 128 MiB under its "
                                  "address-space limit (ulimit -v), "), evidence
    (run,) = load_report(tmp_path / "r.json").run.runs
    assert run.memory is not None
    kinds = run.memory["tensors"]["kinds"]
    assert run.memory["tensors"]["device"] == "cpu"
    assert (kinds["parameter"], kinds["gradient"]) == (128 * MIB, 128 * MIB), kinds
    assert kinds["optimizer_state"] == 256 * MIB + 8 * 4, kinds  # 8 step counters, float32
    batches = kinds.get("other", 0) // (128 * MIB)
    assert kinds.get("other", 0) == batches * 128 * MIB and batches <= 2, kinds
    line = next(e for e in evidence if e.startswith("the tensors then, by kind: "))
    assert line.startswith("the tensors then, by kind: optimizer state 256 MiB, "), line
    assert "parameters 128 MiB" in line and "gradients 128 MiB" in line, line
    assert line.endswith("(the live tensors Python held, each storage once)"), line
    layers = {f"Sequential.{n}": 64 * MIB + 4 for n in range(8)}  # each with its counter
    assert run.memory["tensors"]["modules"] == layers, run.memory["tensors"]
    assert ("the model's state by module: Sequential.0 64 MiB, Sequential.1 64 MiB, "
            "Sequential.2 64 MiB and 5 more (320 MiB)") in evidence, evidence
    share = round(100 * 512 / (512 + 128 * batches))
    assert str(found["action"]).startswith(
        f"the model's state filled {share}% of the tensors, optimizer state the most "
        "(256 MiB): keep a smaller optimizer state"), found["action"]


@contextlib.contextmanager
def _memory_cgroup(limit: int) -> Iterator[Path]:
    """A memory cgroup of its own with ``limit`` bytes (v1 or v2, as the machine has), its
    ``cgroup.procs`` to join it; removed afterwards."""
    name = f"perfstack-test-{uuid.uuid4().hex[:8]}"
    v1, v2 = Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")
    if (v1 / "memory.limit_in_bytes").exists():
        folder, knob = v1 / name, "memory.limit_in_bytes"
    elif "memory" in (v2 / "cgroup.subtree_control").read_text() if (
            v2 / "cgroup.subtree_control").exists() else False:
        folder, knob = v2 / name, "memory.max"
    else:
        pytest.skip("this machine has no memory cgroup controller to limit a run with")
    try:
        folder.mkdir()
        (folder / knob).write_text(str(limit))
    except OSError as exc:
        pytest.skip(f"a memory cgroup cannot be made here ({exc.strerror}): needs root")
    try:
        yield folder / "cgroup.procs"
    finally:
        with contextlib.suppress(OSError):
            folder.rmdir()


def test_the_kernels_oom_killer_is_named_with_the_cgroups_limit(tmp_path: Path) -> None:
    """perfstack and the workload in a memory cgroup of 400 MiB: the kernel's OOM killer
    ends the workload (SIGKILL), which writes nothing on its way out; the report names the
    killer, the cgroup's limit, the line the memory watch last saw take memory, and the
    20 MiB a step it kept."""
    with _memory_cgroup(400 * MIB) as procs:
        command = [sys.executable, "-m", "perfstack", "run", "--plugins", "resources",
                   "--repeat", "1", "--warmup", "0", "-q", "-o", "r.json", str(WORKLOAD)]
        done = subprocess.run(
            ["sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh", *command], cwd=tmp_path,
            env=perfstack_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 8, done.stderr
    found = _oom(tmp_path / "r.json")
    # where a sample last found the memory rising: in keep, or the loop's line calling it
    # or marking the step (sampled: which one is the sampler's luck, all of them the loop's)
    lines = {f"{_line('kept.append(')} in keep", f"{_line('keep(kept)')} in <module>",
             f"{_line('keep(kept)') + 1} in <module>"}
    title = str(found["title"])
    assert title.startswith(f"out of memory at {WORKLOAD}:"), title
    assert title.split(f"{WORKLOAD}:")[1] in lines, (title, lines)
    evidence = found["evidence"]
    assert isinstance(evidence, list)
    assert evidence[0] == ("killed by the kernel's OOM killer (SIGKILL) at its memory "
                           "cgroup's limit, 400 MiB; its memory cgroup counted the kill")
    assert "(+20 MiB a step): a floor that rises" in evidence[2]
    report = load_report(tmp_path / "r.json")
    run = report.run.runs[0]
    assert run.exit.signal_name == "SIGKILL" and run.memory is not None
    assert run.memory["oom_killed"] is True and run.memory["limits"]["cgroup"] == 400 * MIB
    assert run.memory["peak_rss_bytes"] <= 400 * MIB


def _record(status: str, signal_name: str | None = None, tail: str = "",
            memory: dict[str, object] | None = None) -> RunRecord:
    return RunRecord(id="r", role="baseline", backend=None, argv=[], started="", wall_s=1.0,
                     exit=ExitInfo(status, 1 if status == "exited" else None,
                                   9 if signal_name else None, signal_name),
                     stderr_tail=tail, memory=memory)


@pytest.mark.parametrize(("record", "how"), [
    (_record("exited", tail="Traceback ...\nMemoryError\n"), "MemoryError"),
    (_record("exited", tail="Traceback ...\nValueError: no\n"), None),
    (_record("signalled", "SIGKILL", memory={"oom_killed": True}), "the OOM killer"),
    (_record("signalled", "SIGKILL", memory={"oom_killed": False,
                                             "peak_rss_bytes": 390, "limits": {"cgroup": 400}}),
     None),  # counted, and not by the OOM killer: a kill of someone else's
    (_record("signalled", "SIGKILL", memory={"oom_killed": None, "peak_rss_bytes": 390,
                                             "limits": {"cgroup": 400}}), "the OOM killer"),
    (_record("signalled", "SIGKILL", memory={"oom_killed": None, "peak_rss_bytes": 100,
                                             "limits": {"machine": 400}}), None),
    (_record("signalled", "SIGSEGV", memory={"oom_killed": True}), None),
])
def test_what_counts_as_dying_of_memory(record: RunRecord, how: str | None) -> None:
    """A MemoryError; a SIGKILL the cgroup counted; uncounted, a SIGKILL within 10% of a
    limit: and nothing else."""
    assert died_of_memory(record) == how


def test_a_clean_run_keeps_no_memory_record(tmp_path: Path) -> None:
    """The memory at the end is kept only for a run that did not end cleanly."""
    script = tmp_path / "fine.py"
    script.write_text("print('ok')\n")
    done = perfstack_in(tmp_path, "run", "--plugins", "resources", "--repeat", "1",
                        "--warmup", "0", "-q", "-o", "r.json", str(script))
    assert done.code == 0, done.stderr
    assert all(r.memory is None for r in load_report(tmp_path / "r.json").run.runs)
    assert os.environ.get("PERFSTACK_MEMORY_WATCH") != "0"


DEVICE = ROOT / "tests" / "workloads" / "device_oom.py"


@pytest.mark.parametrize(("which", "fix"), [
    ("cache", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
    ("tensors", "a smaller batch (with gradient accumulation), activation checkpointing")])
def test_a_device_out_of_memory_is_named_with_the_fix_that_fits(tmp_path: Path, which: str,
                                                                fix: str) -> None:
    """torch's OutOfMemoryError with a real allocator message: the line that raised it,
    what was asked and free, what the tensors and the allocator's cache held; the cache's
    fix (expandable_segments) where it held more than was asked, else less memory."""
    done = perfstack_in(tmp_path, "run", "--plugins", "resources", "--repeat", "1",
                        "--warmup", "0", "-o", "r.json", str(DEVICE), "--", which)
    assert done.code == 8, done.stderr
    source = DEVICE.read_text("utf-8").splitlines()
    line = next(i for i, t in enumerate(source, 1) if "raise torch.OutOfMemoryError" in t)
    found = _oom(tmp_path / "r.json")
    assert found["title"] == f"out of device memory at {DEVICE}:{line} in forward"
    assert f"The workload failed: out of device memory at {DEVICE}:{line}" in " ".join(
        done.stdout.split())
    asked = "764 MiB asked, 443 MiB free of 47.4 GiB" if which == "cache" else \
        "19.7 GiB asked, 11.9 GiB free of 23.7 GiB"
    assert found["evidence"][0] == f"CUDA out of memory on GPU 0: {asked}"  # type: ignore[index]
    assert fix in str(found["action"])


def test_the_allocators_message_is_read_in_every_shape_it_comes() -> None:
    """'0 bytes', an XPU's message, a truncated one (no finding), the last of several."""
    from perfstack.analysis.rules.cudaoom import parse

    zero = parse("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity "
                 "of 8.00 GiB of which 0 bytes is free. Of the allocated memory 14.51 GiB is "
                 "allocated by PyTorch, and 15.90 MiB is reserved by PyTorch but unallocated.")
    assert zero is not None and zero.free == 0 and zero.asked == 20 * MIB
    xpu = parse("XPU out of memory. Tried to allocate 1.00 GiB. GPU 1 has a total capacity of "
                "64.00 GiB of which 512.00 MiB is free. Of the allocated memory 60.00 GiB is "
                "allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated.")
    assert xpu is not None and xpu.kind == "XPU" and xpu.gpu == 1 and xpu.cache == 0
    assert parse("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a") is None
    two = parse("CUDA out of memory. Tried to allocate 1.00 MiB. GPU 0 has a total capacity of "
                "1.00 GiB of which 0 bytes is free. Of the allocated memory 1.00 GiB is "
                "allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated.\n"
                "CUDA out of memory. Tried to allocate 2.00 MiB. GPU 3 has a total capacity of "
                "1.00 GiB of which 0 bytes is free. Of the allocated memory 1.00 GiB is "
                "allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated.")
    assert two is not None and two.gpu == 3


def _died_of(message: str, rows: list[Row]) -> Report:
    """A report of one run (id "r") that died with ``message``, its memory layer ``rows``."""

    run = RunInfo(command=["train.py"], cwd="/home/u", started="2026-11-29T00:00:00",
                  duration_s=1.0, perfstack_version="0", repeat=1, warmup=0, timeout_s=None,
                  complete=True, runs=[_record("exited", tail=f"Traceback ...\n{message}\n")])
    report = Report(run=run, environment={}, backends=[])
    report.layers[Layer.MEMORY] = rows
    return report


def test_a_device_out_of_memory_names_what_held_it_the_instant_it_ran_out(
        tmp_path: Path) -> None:
    """torch's out-of-memory observer (attached under --torch-memory on a GPU), called as the
    caching allocator calls it: the snapshot it takes that instant is kept beside the run, its
    live blocks are summed by the line that allocated them, and the out-of-memory finding
    names them. (A snapshot in the format torch documents stands in for the allocator's, of
    which this machine has none: tests/fixtures/gpu-runs/record.sh's "loops" records one on
    a GPU.)"""
    import pickle
    from types import SimpleNamespace

    from perfstack_plugins.torchprof.inproc import CUDA_OOM_SNAPSHOT, _on_device_oom
    from perfstack_plugins.torchprof.memcats import MEMORY_SIDECAR
    from perfstack_plugins.torchprof.memrows import memory_categories

    from perfstack.analysis.rules.memory import out_of_memory

    here = [{"filename": "/home/u/train.py", "line": 41, "name": "forward"},
            {"filename": "/venv/site-packages/torch/nn/modules/module.py", "line": 1739,
             "name": "_call_impl"}]
    there = [{"filename": "/home/u/train.py", "line": 57, "name": "step"}]
    snapshot = {"segments": [
        {"device": 0, "address": 0, "total_size": 24 * MIB, "stream": 0,
         "blocks": [{"size": 12 * MIB, "state": "active_allocated", "frames": here},
                    {"size": 6 * MIB, "state": "active_allocated", "frames": there},
                    {"size": 4 * MIB, "state": "active_allocated", "frames": here},
                    {"size": 2 * MIB, "state": "inactive", "frames": []}]},
        {"device": 1, "address": 0, "total_size": 8 * MIB, "stream": 0,
         "blocks": [{"size": 8 * MIB, "state": "active_allocated", "frames": there}]}],
        "device_traces": [[], []]}
    import torch as real

    torch = SimpleNamespace(cuda=SimpleNamespace(memory=SimpleNamespace(
        _snapshot=lambda: snapshot)), Tensor=real.Tensor, nn=real.nn, optim=real.optim)
    _on_device_oom(torch, str(tmp_path))(0, 20 * MIB, 22 * MIB, 2 * MIB)
    assert pickle.loads((tmp_path / CUDA_OOM_SNAPSHOT).read_bytes()) == snapshot
    saved = json.loads((tmp_path / MEMORY_SIDECAR).read_text("utf-8"))
    assert saved["cuda_oom"] == {
        "device": "cuda:0", "asked": 20 * MIB, "free": 2 * MIB, "reserved": 24 * MIB,
        "allocated": 22 * MIB, "largest_free": 2 * MIB, "fragmentation": 0.0,
        "held": [{"size": 16 * MIB, "where": "forward (/home/u/train.py:41)"},
                 {"size": 6 * MIB, "where": "step (/home/u/train.py:57)"}],
        "categories": {"other": 22 * MIB}, "modules": {}}  # (no tensor of ours starts one)
    rows, _, _, _ = memory_categories(tmp_path)
    assert [(r.key, r.values["at_oom"].value) for r in rows] == [
        ("forward (/home/u/train.py:41)", 16 * MIB), ("step (/home/u/train.py:57)", 6 * MIB),
        ("cuda:0 out of memory: other", 22 * MIB)]
    message = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 "
               "has a total capacity of 24.00 MiB of which 2.00 MiB is free. Of the allocated "
               "memory 22.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch "
               "but unallocated.")
    report = _died_of(message, rows)
    (found,), explained = out_of_memory(report, {})
    assert explained == {"r"} and found.title == "out of device memory"
    assert ("what held it the instant it ran out: forward (/home/u/train.py:41) 16 MiB, step "
            "(/home/u/train.py:57) 6 MiB (torch: the allocator's snapshot then)") in found.evidence


def test_a_device_out_of_memory_says_what_kind_of_tensor_filled_it(tmp_path: Path) -> None:
    """The instant the device ran out, each live block is a parameter's, a gradient's, an
    optimizer's state's or another tensor's, by the storage that starts it: the observer
    finds the live parameters and optimizers among the objects the collector tracks (a real
    model and a real Adam after a step, here on the CPU), and the finding names the kind that
    filled the device with its fix. (The snapshot, in torch's format, is laid out around
    those tensors' storages: the allocator's own, on a GPU, is what record.sh's "loops"
    records.)"""
    from types import SimpleNamespace

    import torch as real
    from perfstack_plugins.torchprof.inproc import _on_device_oom
    from perfstack_plugins.torchprof.memcats import MEMORY_SIDECAR
    from perfstack_plugins.torchprof.memrows import memory_categories

    from perfstack.analysis.rules.memory import out_of_memory

    model = real.nn.Linear(512, 512)  # 1 MiB of weight, 2 KiB of bias
    adam = real.optim.Adam(model.parameters())
    model(real.randn(8, 512)).sum().backward()
    adam.step()
    tensors = [(model.weight, "parameter"), (model.bias, "parameter"),
               (model.weight.grad, "gradient"), (model.bias.grad, "gradient"),
               *((value, "optimizer_state") for state in adam.state.values()
                 for value in state.values() if value.numel() > 1)]
    activation = real.empty(6 * MIB // 4)  # 6 MiB: the block no owner starts
    frames = [{"filename": "/home/u/train.py", "line": 12, "name": "step"}]
    segments = [{"device": 0, "address": t.untyped_storage().data_ptr(),
                 "total_size": t.untyped_storage().nbytes(), "stream": 0,
                 "blocks": [{"size": t.untyped_storage().nbytes(), "state": "active_allocated",
                             "frames": frames}]}
                for t, _ in [*tensors, (activation, "other")]]
    segments.append({"device": 0, "address": 1 << 40, "total_size": 2 * MIB, "stream": 0,
                     "blocks": [{"size": 2 * MIB, "state": "inactive", "frames": []}]})
    snapshot = {"segments": segments, "device_traces": [[]]}
    torch = SimpleNamespace(cuda=SimpleNamespace(memory=SimpleNamespace(
        _snapshot=lambda: snapshot)), Tensor=real.Tensor, nn=real.nn, optim=real.optim)
    _on_device_oom(torch, str(tmp_path))(0, 8 * MIB, 0, 0)
    saved = json.loads((tmp_path / MEMORY_SIDECAR).read_text("utf-8"))
    size = {kind: sum(t.untyped_storage().nbytes() for t, k in tensors if k == kind)
            for kind in ("parameter", "gradient", "optimizer_state")}
    assert size["optimizer_state"] == 2 * size["parameter"] == 2 * size["gradient"]
    assert saved["cuda_oom"]["categories"] == {"other": 6 * MIB, **size}
    assert saved["cuda_oom"]["modules"] == {"Linear": sum(size.values())}  # the model's state
    rows, _, _, _ = memory_categories(tmp_path)
    message = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 MiB. GPU 0 "
               "has a total capacity of 12.01 MiB of which 0 bytes is free. Of the allocated "
               "memory 10.01 MiB is allocated by PyTorch, and 2.00 MiB is reserved by "
               "PyTorch but unallocated.")
    report = _died_of(message, rows)
    (found,), _ = out_of_memory(report, {})
    assert ("the tensors then, by kind: other tensors (activations, inputs, temporaries) 6 MiB, "
            "optimizer state 2 MiB, gradients 1 MiB, parameters 1 MiB (torch: each live block "
            "by the tensor it holds)") in found.evidence, found.evidence
    assert "the model's state by module: Linear 4.01 MiB" in found.evidence, found.evidence
    # the cache held 2 of the 12 MiB reserved, less than asked: the tensors' fix; the model's
    # state held 40% of them: the activations' (a smaller batch)
    assert found.action.startswith("the tensors themselves filled the device"), found.action
    lines = [r.key for r in rows if r.attrs.get("kind") == "cuda-oom-block"]
    assert lines == ["step (/home/u/train.py:12)"]
    # where the model's state fills most of the tensors: the fix of its largest kind, where
    # a smaller state can make room for what was asked (not the 8 MiB: the state is 4 MiB)
    activation.resize_(MIB // 4 // 4)
    segments[-2]["blocks"][0]["size"] = segments[-2]["total_size"] = MIB // 4
    _on_device_oom(torch, str(tmp_path))(0, 8 * MIB, 0, 0)
    rows, _, _, _ = memory_categories(tmp_path)
    report.layers[Layer.MEMORY] = rows
    (found,), _ = out_of_memory(report, {})
    assert found.action.startswith("the tensors themselves filled the device"), found.action
    tail = str(report.run.runs[0].stderr_tail)
    report.run.runs[0].stderr_tail = tail.replace("Tried to allocate 8.00 MiB", "Tried to allocate "
                                           "2.00 MiB").replace("and 2.00 MiB is reserved",
                                                                "and 0 bytes is reserved")
    (found,), _ = out_of_memory(report, {})
    assert found.action.startswith(
        "the model's state filled 94% of the tensors, optimizer state the most (2 MiB): keep "
        "a smaller optimizer state"), found.action
