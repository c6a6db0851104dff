"""The bundled workloads run as plain scripts, take the DLBS flags, and report throughput."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

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
}


def test_every_workload_is_covered():
    scripts = {p.name for p in WORKLOADS.glob("*.py")} - {"harness.py", "models.py",
                                                           "threaded.py"}
    assert scripts == set(SMALL)


@pytest.mark.parametrize("script", sorted(SMALL))
def test_workload_runs_and_prints_throughput(script):
    proc = subprocess.run([sys.executable, str(WORKLOADS / script), *SMALL[script]],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^throughput: [0-9.]+ ", proc.stdout, re.M), proc.stdout


def test_forward_only_and_dtype_flags():
    proc = subprocess.run([sys.executable, str(WORKLOADS / "resnet50.py"), "--forward-only",
                           "--dtype", "bfloat16", "--batch-size", "1", "--image-size", "32",
                           "--num-batches", "1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "inference bfloat16" in proc.stdout


def test_cifar100_trains_under_torchrun_with_ddp():
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    assert torchrun, "torchrun comes with torch"
    proc = subprocess.run([torchrun, "--nproc-per-node", "2", str(WORKLOADS / "cifar100.py"),
                           "--num-batches", "2", "--batch-size", "8"], capture_output=True,
                          text=True, timeout=180, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "x 2 rank(s)" in proc.stdout and proc.stdout.count("throughput:") == 1
