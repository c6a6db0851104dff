"""How close a large matrix product and a large element-wise add run to this machine's
measured ceilings, as perfstack's report says it.

    .venv/bin/python bench/roofline.py [--rounds 3]

Each round measures the ceilings afresh (a cache folder of its own) and profiles
bench/roofline_workload.py with the torch backend; it prints, for ``aten::mm`` (2048² fp32)
and ``aten::add_`` (128 Mi fp32 elements, in place), the achieved rate, the ceiling it is
measured against, the share of that roof and the bound the report gives. Run it alone on
the machine. The targets (issue #32): the product within 15% of the fp32 peak, the add
within 20% of the bandwidth.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from timing import perfstack_command

ROOT = Path(__file__).resolve().parent.parent
OPS = {"aten::mm": "compute", "aten::add_": "memory"}


@dataclass
class Placed:
    """One op as the report placed it."""

    share: float  # % of its roof
    bound: str
    achieved: float  # FLOP/s or bytes/s
    ceiling: float  # the fp32 peak or the bandwidth


def one_round(work: Path) -> dict[str, Placed]:
    env = {**os.environ, "PERFSTACK_CACHE_DIR": str(work / "cache")}
    env.pop("PERFSTACK_CEILINGS", None)
    subprocess.run([perfstack_command(), "run", "-q", "--plugins", "torch",
                    "--repeat", "1", "--warmup", "0", "-o", str(work / "report.json"),
                    str(ROOT / "bench/roofline_workload.py")], cwd=work, env=env, check=True)
    report = json.loads((work / "report.json").read_text())
    cpu = report["environment"]["ceilings"]["cpu"]
    out: dict[str, Placed] = {}
    for row in report["layers"]["framework"]:
        op = row["attrs"].get("op")
        if op in OPS and "roofline" in row["attrs"]:
            r = row["attrs"]["roofline"]
            mm = op == "aten::mm"
            out[op] = Placed(r["roof_share"], r["bound"], r["flop_s" if mm else "byte_s"],
                             cpu["peak_flops"]["fp32"] if mm else cpu["bandwidth"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rounds = []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            rounds.append(one_round(Path(tmp)))
        print(f"round {i + 1}: " + ", ".join(
            f"{op} {r.share:.1f}% of its roof ({r.bound})"
            for op, r in rounds[-1].items()), flush=True)
    for op, expected in OPS.items():
        shares = [r[op].share for r in rounds if op in r]
        achieved = [r[op].achieved for r in rounds if op in r]
        ceiling = [r[op].ceiling for r in rounds if op in r]
        bounds = sorted({r[op].bound for r in rounds if op in r})
        unit = "GFLOP/s" if op == "aten::mm" else "GB/s"
        print(f"{op}: median {statistics.median(shares):.1f}% of its roof "
              f"(rounds {', '.join(f'{s:.1f}' for s in shares)}); achieved "
              f"{statistics.median(achieved) / 1e9:.3g} {unit} of "
              f"{statistics.median(ceiling) / 1e9:.3g} {unit}; bound {'/'.join(bounds)} "
              f"(expected {expected})")


if __name__ == "__main__":
    main()
