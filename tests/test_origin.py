"""Whose code a frame is, however a profiler spells its path: the workload's own files are
those under the script's folder (relative to the script's folder, to an ancestor the script
was run from, or absolute); libraries are what site-packages and the standard library say."""

from __future__ import annotations

import pytest

from perfstack.analysis.origin import origin

HOME = "/repo/workloads"


@pytest.mark.parametrize("file, shown", [
    ("tiny_mlp.py", "tiny_mlp.py"),  # torch's tracer: relative to the script's folder
    ("workloads/tiny_mlp.py", "tiny_mlp.py"),  # py-spy: `python workloads/tiny_mlp.py`
    ("repo/workloads/harness.py", "harness.py"),  # run from two folders up
    ("./workloads/models/mlp.py", "models/mlp.py"),
    ("/repo/workloads/tiny_mlp.py", "tiny_mlp.py"),
])
def test_the_workloads_own_files_are_its_own(file: str, shown: str) -> None:
    found = origin(file, HOME)
    assert found.ours and found.library == "" and found.path == shown, found


@pytest.mark.parametrize("file, library", [
    ("torch/nn/modules/module.py", "torch"),
    ("/venv/lib/python3.11/site-packages/torch/optim/sgd.py", "torch"),
    ("/usr/lib/python3.11/json/decoder.py", "stdlib"),
    ("<frozen importlib._bootstrap>", "importlib"),
])
def test_libraries_are_folded_into_their_package(file: str, library: str) -> None:
    found = origin(file, HOME)
    assert not found.ours and found.library == library, found
