"""Reading big reports: `validate`, `show` and `diff` against `json.load` of the same file.

    .venv/bin/python bench/read_reports.py [--rows 20000] [--rounds 5] [REPORT]

Makes a report of ``--rows`` rows (a real tiny_mlp report from the torch and resources
backends, its framework and kernel rows repeated with distinct keys, shapes and values, so it
has the size and shape of a long torch run; or grows the REPORT given), and a second one with
every value 3% higher. Then, round by round, each round's order reversed from the last, times
in fresh processes:

- ``python -c 'json.load(...)'``: the floor, reading the same bytes;
- the installed ``perfstack`` script, as users run it: ``validate A``, ``show A``,
  ``diff A B``;
- ``python -c pass``, for the interpreter's own start-up.

Prints each command's time (median, min, max) and its ratio to json.load and to ``python -c
pass`` within each round (min, median, max). Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import perfstack_command, print_table, time_commands

ROOT = Path(__file__).resolve().parent.parent


def make_report(folder: Path, rows: int, given: Path | None) -> tuple[Path, Path]:
    """Return two reports of ``rows`` rows: A, and B with every value 3% higher."""
    from perfstack.report import Layer, Quantity, Row
    from perfstack.report.files import load_report, save_report

    if given is None:
        given = folder / "seed.json"
        subprocess.run([perfstack_command(), "run", "--plugins", "torch,resources",
                        "--repeat", "2", "--warmup", "0", "-q", "-o", str(given),
                        str(ROOT / "workloads" / "tiny_mlp.py")], cwd=folder, check=True,
                       capture_output=True)
    paths = []
    for name, scale in (("a", 1.0), ("b", 1.03)):
        report = load_report(given)
        seeds = [(layer, row) for layer in (Layer.FRAMEWORK, Layer.KERNEL)
                 for row in report.layers[layer]]
        for layer in Layer:
            report.layers[layer] = []
        for i in range(rows):
            layer, seed = seeds[i % len(seeds)]
            values = {k: Quantity((q.value or 0) * scale * (1 + (i % 97) / 97), q.unit)
                      for k, q in seed.values.items()}
            key = f"{seed.key} #{i}"
            report.layers[layer].append(Row(key, f"{seed.name} #{i}", seed.source, values,
                                            dict(seed.attrs),
                                            {k: [f"{v} #{i}" for v in vs]
                                             for k, vs in seed.links.items()}))
        path = folder / f"{name}.json"
        save_report(report, path)
        paths.append(path)
    return paths[0], paths[1]


def main() -> int:
    """Make the reports, time the commands side by side, print times and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", nargs="?", type=Path)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        a, b = make_report(folder, ns.rows, ns.report)
        py, perfstack = sys.executable, perfstack_command()
        commands = {
            "python -c pass": [py, "-c", "pass"],
            "json.load": [py, "-c", f"import json; json.load(open({str(a)!r}))"],
            "perfstack validate": [perfstack, "validate", str(a)],
            "perfstack show": [perfstack, "show", str(a)],
            "perfstack diff": [perfstack, "diff", str(a), str(b)],
        }
        times = time_commands(commands, ns.rounds, folder, ok=(0, 1))
        print(f"report: {ns.rows:,} rows, {a.stat().st_size / 1e6:.1f} MB")
        print_table(times, "json.load")
        print()
        print_table(times, "python -c pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
