"""GVProf's three one-kernel units in one process, one after another, as each runs alone
(``python workloads/unit_*.py ARGS``): one run of the value-pattern analysis reads all three."""

import runpy
import sys
from pathlib import Path

UNITS = Path(__file__).resolve().parents[2] / "workloads"
RUNS = (("unit_embedding.py", ["--iterations", "3"]),
        ("unit_replication_pad3d.py", ["--iterations", "2", "--size", "32"]),
        ("unit_spatial_convolution.py", ["--iterations", "2", "--size", "16"]))

if __name__ == "__main__":
    sys.path.insert(0, str(UNITS))  # their shared harness
    for script, args in RUNS:
        sys.argv = [str(UNITS / script), *args]
        runpy.run_path(str(UNITS / script), run_name="__main__")
