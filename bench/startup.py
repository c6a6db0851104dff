"""Start-up cost of `perfstack --help` and `perfstack show` against `python -c pass`.

    .venv/bin/python bench/startup.py [--rounds 15]

Both commands must stay light: neither may import torch (checked here too).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import print_table, time_commands

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run([py, "-m", "perfstack", "run", "-q", "--repeat", "1", "--warmup", "0",
                        "-o", "report.json", str(ROOT / "tests/workloads/busy.py")],
                       cwd=work, check=True, stderr=subprocess.DEVNULL)
        commands = {
            "python -c pass": [py, "-c", "pass"],
            "python -c 'import torch'": [py, "-c", "import torch"],
            "perfstack --help": [py, "-m", "perfstack", "--help"],
            "perfstack show report.json": [py, "-m", "perfstack", "show", "report.json"],
        }
        times = time_commands(commands, args.rounds, work)
        print_table(times, "python -c pass")
        for name in ("perfstack --help", "perfstack show report.json"):
            argv = [*commands[name][:1], "-X", "importtime", *commands[name][1:]]
            err = subprocess.run(argv, cwd=work, capture_output=True, text=True).stderr
            print(f"{name}: imports torch: {'| torch' in err}")


if __name__ == "__main__":
    main()
