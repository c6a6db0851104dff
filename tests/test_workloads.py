"""The bundled workloads run as plain scripts, take the DLBS flags, and report throughput.
(CIFAR-100 under torchrun with DDP: test_distributed.py.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import ROOT

pytest.importorskip("torch")
WORKLOADS = ROOT / "workloads"
SMALL = {
    "resnet50.py": ["--batch-size", "2", "--image-size", "32", "--num-batches", "1"],
    "bert.py": ["--batch_size", "2", "--num_batches", "1", "--seq-len", "16", "--vocab", "512"],
    "deepwave.py": ["--num-batches", "1", "--grid", "12", "--time-steps", "4"],
    "cifar100.py": ["--num-batches", "1", "--batch-size", "8"],
    "tiny_mlp.py": ["--num-batches", "2"],
    "benchmark.py": ["--model", "bert", "--forward_only", "true", "--num-batches", "1",
                     "--seq-len", "8", "--vocab", "256"],
    "unit_spatial_convolution.py": ["--iterations", "1", "--size", "8"],
    "unit_replication_pad3d.py": ["--iterations", "1", "--size", "12"],
    "unit_embedding.py": ["--iterations", "1", "--vocab", "1000"],
    "gil_cpu.py": ["--items", "4"],
    "gil_io.py": ["--items", "4"],
    "gil_torch.py": ["--items", "4", "--size", "16"],
    "mem_leak.py": ["--steps", "2", "--width", "16"],
    "mem_activations.py": ["--steps", "1", "--batch-size", "8", "--depth", "2", "--width", "8"],
    "mem_temporaries.py": ["--steps", "1", "--samples", "2", "--features", "4"],
    # dynamo alone (the "eager" backend): its graph break and recompile, no inductor build
    "compiled.py": ["--steps", "2", "--batch-sizes", "4,6", "--width", "8", "--hidden", "8",
                    "--backend", "eager"],
    "gpt2_train.py": ["--steps", "1", "--batch-size", "2", "--seq-len", "16", "--layers", "1",
                      "--width", "32", "--heads", "2", "--vocab", "256"],
    "lightning_fit.py": ["--max-steps", "2", "--batch-size", "8", "--width", "8",
                         "--hidden", "8"],
    # the GPU loops' smallest on a CPU: the launch-bound one (the others' sizes are a GPU's)
    "gpu_loops.py": ["--loop", "launch", "--steps", "2", "--device", "cpu"],
}


def test_every_workload_is_covered():
    scripts = {p.name for p in WORKLOADS.glob("*.py")} - {"harness.py", "models.py",
                                                           "threaded.py"}
    assert scripts == set(SMALL)


#: Runs each workload as ``python SCRIPT ARGS`` would (``__main__``, its own argv, its folder
#: first on sys.path), one after another in one interpreter so that torch is imported once, not
#: thirteen times; prints one JSON line: each run's exit and what it printed.
_RUN_EACH = """
import contextlib, io, json, runpy, sys, traceback
results = {}
for name, path, args in json.loads(sys.argv[1]):
    out = io.StringIO()
    saved = sys.argv, list(sys.path)
    sys.argv, sys.path[0] = [path, *args], str(__import__("pathlib").Path(path).parent)
    code = 0
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:
            code, out = 1, io.StringIO(out.getvalue() + traceback.format_exc())
    sys.argv, sys.path[:] = saved
    results[name] = {"code": code, "stdout": out.getvalue()}
print(json.dumps(results))
"""

RUNS = {**{script: (script, args) for script, args in SMALL.items()},
        "resnet50 forward bfloat16": ("resnet50.py", [
            "--forward-only", "--dtype", "bfloat16", "--batch-size", "1", "--image-size", "32",
            "--num-batches", "1"])}


@pytest.fixture(scope="module")
def printed() -> dict[str, dict[str, Any]]:
    """What each small run of a bundled workload printed, and its exit status."""
    runs = [[name, str(WORKLOADS / script), args] for name, (script, args) in RUNS.items()]
    proc = subprocess.run([sys.executable, "-c", _RUN_EACH, json.dumps(runs)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results: dict[str, dict[str, Any]] = json.loads(proc.stdout.splitlines()[-1])
    return results


@pytest.mark.parametrize("script", sorted(SMALL))
def test_workload_runs_and_prints_throughput(printed: dict[str, dict[str, Any]],
                                             script: str) -> None:
    run = printed[script]
    assert run["code"] == 0, run["stdout"][-2000:]
    assert re.search(r"^throughput: [0-9.]+ ", run["stdout"], re.M), run["stdout"]


def test_forward_only_and_dtype_flags(printed: dict[str, dict[str, Any]]) -> None:
    run = printed["resnet50 forward bfloat16"]
    assert run["code"] == 0, run["stdout"][-2000:]
    assert "inference bfloat16" in run["stdout"]
