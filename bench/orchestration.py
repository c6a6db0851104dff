"""What perfstack itself costs: `perfstack run` with only the resources backend vs the script.

    .venv/bin/python bench/orchestration.py [--rounds 5]

With --repeat 1 --warmup 0 and the resources backend (which reads the baseline run and adds
no run of its own), the workload runs once either way; the difference is perfstack: its
start-up, environment capture, the bootstrap in the child, and writing the report.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from timing import perfstack_command, print_table, time_commands

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = {
    "busy.py (0.2 s pure Python)": ROOT / "tests/workloads/busy.py",
    "tiny_mlp.py --num-batches 50 (torch)": ROOT / "workloads/tiny_mlp.py",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        for label, script in WORKLOADS.items():
            extra = ["--num-batches", "50"] if "tiny_mlp" in label else []
            commands = {
                f"python {script.name}": [py, str(script), *extra],
                f"perfstack run --plugins resources {script.name}": [
                    perfstack_command(), "run", "-q", "--plugins", "resources", "--repeat",
                    "1", "--warmup", "0", str(script), "--", *extra],
            }
            print(f"\n{label}")
            print_table(time_commands(commands, args.rounds, Path(tmp)), f"python {script.name}")


if __name__ == "__main__":
    main()
