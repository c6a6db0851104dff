"""Out of device memory on a real GPU: two workloads run to their death on an H200 by
record.sh's "loops" (tests/fixtures/gpu-runs/loops/oom and oom-adam), under
``--plugins torch --torch-memory --keep-going``. What held the device the instant it ran out
is read again by today's code from the allocator's summary the observer wrote then, and held
to what the workloads' sources say."""

from __future__ import annotations

import gzip
import pickle
import shutil
from pathlib import Path

from perfstack_plugins.torchprof.memrows import memory_categories

from perfstack.analysis.rules.failures import failures
from perfstack.report import Finding, Layer, Report
from perfstack.report.files import load_report

LOOPS = Path(__file__).parent / "fixtures" / "gpu-runs" / "loops"
GIB = 1 << 30


def _died(name: str, tmp_path: Path) -> Report:
    """The recorded report of ``name``, its memory layer made again from the torch run's
    sidecar (the allocator's summary at the instant, and at the end)."""
    folder = tmp_path / name
    shutil.copytree(LOOPS / name / "torch", folder)
    report = load_report(LOOPS / name / "report.json.gz")
    rows, _, _, _ = memory_categories(folder)
    report.layers[Layer.MEMORY] = rows
    return report


def _oom(report: Report) -> Finding:
    """The out-of-memory finding, as the report's failures say it (the first)."""
    found = failures(report)
    assert found and found[0].rule == "run.out-of-memory", [f.title for f in found]
    return found[0]


def test_a_model_whose_state_fills_the_device_is_named_by_kind_module_and_line(
        tmp_path: Path) -> None:
    """adam_fills_device.py: 80 layers of 8192x8192 float32 (20 GiB of parameters), their
    gradients (20 GiB), Adam's two moments (40 GiB), then 4 GiB more a step in ``hold`` until
    the 140 GiB device refuses the fifteenth: 56 GiB of other tensors. Each layer's state is
    1 GiB (256 MiB each of weight, gradient and two moments)."""
    report = _died("oom-adam", tmp_path)
    found = _oom(report)
    assert found.evidence[-1] == "runs: baseline-1, torch"
    assert found.title == "out of device memory at tests/workloads/adam_fills_device.py:24 in hold"
    assert found.evidence[0] == "CUDA out of memory on GPU 0: 4 GiB asked, 3.2 GiB free of 140 GiB"
    assert ("the tensors then, by kind: other tensors (activations, inputs, temporaries) 56 GiB, "
            "optimizer state 40 GiB, gradients 20 GiB, parameters 20 GiB (torch: each live "
            "block by the tensor it holds)") in found.evidence, found.evidence
    assert ("the model's state by module: Sequential.0 1 GiB, Sequential.1 1 GiB, Sequential.2 "
            "1 GiB and 77 more (77 GiB)") in found.evidence, found.evidence
    held = next(e for e in found.evidence if e.startswith("what held it the instant"))
    assert held.startswith("what held it the instant it ran out: hold (tests/workloads/"
                           "adam_fills_device.py:24) 56 GiB, <module> (tests/workloads/"
                           "adam_fills_device.py:48) 40 GiB")
    # the model's state held 80 of 136 GiB (59%): its largest kind's fix, Adam's state
    assert found.action.startswith("the model's state filled 59% of the tensors, optimizer "
                                   "state the most (40 GiB)"), found.action
    kinds = {r.name: r.values["at_oom"].value for r in report.layers[Layer.MEMORY]
             if r.attrs.get("kind") == "oom-category"}
    assert sorted(kinds.values()) == [20 * GIB, 20 * GIB, 40 * GIB, 56 * GIB]
    # the raw snapshot the observer kept is torch's own, and its live blocks hold it all
    with gzip.open(LOOPS / "oom-adam" / "torch" / "cuda-oom.pickle.gz") as fh:
        snapshot = pickle.load(fh)
    live = sum(b["size"] for s in snapshot["segments"] for b in s["blocks"]
               if b["state"] == "active_allocated")
    assert live == 136 * GIB


def test_tensors_kept_across_steps_are_named_at_their_line(tmp_path: Path) -> None:
    """grows_on_device.py keeps 2 GiB more a step in ``keep``: at the instant, every live
    byte is ``keep``'s (138 GiB) and no model's state; the fix is the tensors', not the
    cache's (it held nothing)."""
    report = _died("oom", tmp_path)
    found = _oom(report)
    assert found.title == "out of device memory at tests/workloads/grows_on_device.py:16 in keep"
    assert ("what held it the instant it ran out: keep (tests/workloads/grows_on_device.py:16) "
            "138 GiB (torch: the allocator's snapshot then)") in found.evidence, found.evidence
    assert not any(e.startswith("the model's state") for e in found.evidence)
    assert found.action.startswith("the tensors themselves filled the device")


def test_without_the_snapshot_the_finding_says_how_to_take_one(tmp_path: Path) -> None:
    """The same death without the torch run (skipped: the workload failed without a profiler
    too): the allocator's message alone, and how to learn what held the device."""
    report = _died("oom", tmp_path)
    report.layers[Layer.MEMORY] = []
    found = _oom(report)
    assert ("what held it the instant it ran out: not recorded; perfstack run --plugins torch "
            "takes the allocator's snapshot then (its memory option: perfstack run --help), "
            "with --keep-going, since the workload dies without a profiler too"
            ) in found.evidence, found.evidence


def test_the_answer_says_what_held_the_device(tmp_path: Path) -> None:
    """The report's answer, at 80 columns: the line that asked, then what held the device
    the instant it ran out."""
    from tests.conftest import perfstack_in

    done = perfstack_in(tmp_path, "show", str(LOOPS / "oom" / "report.json.gz"),
                        env={"COLUMNS": "80"})
    assert done.code == 0, done.stderr
    answer = " ".join(done.stdout[done.stdout.index("Answer"):
                                  done.stdout.index("Findings")].split())
    assert answer == (
        "Answer The workload failed: out of device memory at "
        "tests/workloads/grows_on_device.py:16 in keep. What held it the instant it ran out: "
        "keep (tests/workloads/grows_on_device.py:16) 138 GiB (torch: the allocator's snapshot "
        "then). The figures below measure the failing run, not the workload's work."), answer


def test_the_unprofiled_run_names_the_kinds_by_its_own_walk() -> None:
    """The Adam death on the H200 with no profiler (loops/oom-walk: --plugins nvml, skipped
    as the baseline died): as the script's CUDA OutOfMemoryError left it, the bootstrap's walk
    of the device's live tensors wrote the kinds and the model's modules, to the byte what the
    torch run's observer found the instant the device ran out (loops/oom-adam); only the lines
    need the allocator's history, and the finding says so."""
    import json

    walked = json.loads((LOOPS / "oom-walk" / "tensors-at-oom.json").read_text())
    at_oom = json.loads((LOOPS / "oom-adam" / "torch" / "torch-memory.json").read_text())
    assert walked["device"] == "cuda"
    assert walked["kinds"] == at_oom["cuda_oom"]["categories"]
    assert walked["modules"] == at_oom["cuda_oom"]["modules"]
    report = load_report(LOOPS / "oom-walk" / "report.json.gz")
    (baseline,) = report.run.runs
    assert (baseline.memory or {})["tensors"] == walked  # (the run record keeps it)
    found = _oom(report)
    assert found.title == "out of device memory at tests/workloads/adam_fills_device.py:24 in hold"
    assert ("the tensors then, by kind: other tensors (activations, inputs, temporaries) 56 GiB, "
            "optimizer state 40 GiB, gradients 20 GiB, parameters 20 GiB (the live tensors "
            "Python held when the script died, each storage once)") in found.evidence
    assert any(e.startswith("the model's state by module: Sequential.0 1 GiB, Sequential.1 "
                            "1 GiB, Sequential.2 1 GiB and 77 more") for e in found.evidence)
    assert ("the lines that allocated it: not recorded; a backend of the memory layer takes "
            "the allocator's snapshot then ('perfstack plugins' lists them), with "
            "--keep-going") in found.evidence, found.evidence
    assert not any(e.startswith("what held it the instant") for e in found.evidence)
    assert found.action.startswith("the model's state filled 59% of the tensors")


def test_which_exceptions_are_a_devices_refusal_and_whose() -> None:
    """The bootstrap walks the tensors of the device the exception names, and only then."""
    import torch

    from perfstack.inprocess.tensorkinds import oom_device


    assert oom_device(torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of "
        "139.81 GiB of which 3.18 GiB is free.")) == "cuda"
    assert oom_device(RuntimeError("HIP out of memory. Tried to allocate 2.00 GiB")) == "cuda"
    assert oom_device(RuntimeError("XPU out of memory. Tried to allocate 1.00 GiB")) == "xpu"
    assert oom_device(MemoryError()) == "cpu"
    assert oom_device(RuntimeError("[enforce fail at alloc_cpu.cpp:117] . DefaultCPUAllocator: "
                                   "can't allocate memory: you tried to allocate 8 bytes")) == "cpu"
    assert oom_device(RuntimeError("mat1 and mat2 shapes cannot be multiplied")) is None
    assert oom_device(ValueError("CUDA out of memory")) is None
