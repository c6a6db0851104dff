"""Start-up cost of `perfstack --help` and `perfstack show` against `python -c pass`.

    .venv/bin/python bench/startup.py [--rounds 15]

Times the installed `perfstack` script (as users run it) and `python -c pass` side by side,
each round's order reversed from the last, and prints each command's time (median, min, max)
and its ratio to `python -c pass` within each round (min, median, max). The report shown is a
small one made first (tests/workloads/busy.py, one run). Neither command may import torch
(checked here too). Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import perfstack_command, print_table, time_commands

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    py, perfstack = sys.executable, perfstack_command()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run([perfstack, "run", "-q", "--repeat", "1", "--warmup", "0",
                        "-o", "report.json", str(ROOT / "tests/workloads/busy.py")],
                       cwd=work, check=True, stderr=subprocess.DEVNULL)
        commands = {
            "python -c pass": [py, "-c", "pass"],
            "python -c 'import torch'": [py, "-c", "import torch"],
            "perfstack --help": [perfstack, "--help"],
            "perfstack show report.json": [perfstack, "show", "report.json"],
        }
        times = time_commands(commands, args.rounds, work)
        print_table(times, "python -c pass")
        for name in ("perfstack --help", "perfstack show report.json"):
            argv = [py, "-X", "importtime", *commands[name]]
            err = subprocess.run(argv, cwd=work, capture_output=True, text=True).stderr
            print(f"{name}: imports torch: {'| torch' in err}")


if __name__ == "__main__":
    main()
