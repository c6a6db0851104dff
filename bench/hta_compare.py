"""perfstack's GPU figures against Holistic Trace Analysis (HTA) on the same real traces.

    .venv/bin/python bench/hta_compare.py [--venv DIR] [--record tests/fixtures/hta]

Installs HTA (``HolisticTraceAnalysis==0.5.0``, no torch needed) into a venv of its own,
runs its kernel breakdown and temporal breakdown on each trace of ../shared/gpu-traces, reads
the same traces with perfstack's torch trace reader, and prints, per trace:

- per kernel name: how many names HTA and perfstack count the same calls of, and the largest
  relative difference of their summed time among those (HTA rounds ns timestamps to µs);
- the names where the counts differ, and why they may (HTA keeps only the kernels of the
  steps it assigns them to: it drops the last step and kernels launched before the window);
- HTA's temporal breakdown (idle / compute / non-compute, over its own window) beside
  perfstack's (gpu_time.*, over the profiled steps).

``--record DIR`` also writes what HTA said as JSON (one file per trace): the tests compare
perfstack to those recorded outputs without installing HTA.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT.parent / "shared" / "gpu-traces"
HTA = "HolisticTraceAnalysis==0.5.0"
#: HTA rounds ns timestamps down to whole µs (start and duration): a call loses up to 2 µs.
ROUNDING_US = 2.0

#: Run inside HTA's venv: one trace in, HTA's breakdowns out as JSON.
HELPER = r'''
import json, os, shutil, sys, tempfile, warnings
warnings.filterwarnings("ignore")
from hta.trace_analysis import TraceAnalysis
src = sys.argv[1]
folder = tempfile.mkdtemp()
shutil.copy(src, os.path.join(folder, "rank-0.json.gz"))
ta = TraceAnalysis(trace_dir=folder)
tb = ta.get_temporal_breakdown(visualize=False)
kt, km = ta.get_gpu_kernel_breakdown(visualize=False, num_kernels=100000,
                                     include_memory_kernels=True)
kernels = {}
for _, r in km.iterrows():
    count = round(float(r["sum (us)"]) / float(r["mean (us)"])) if r["mean (us)"] else 0
    kernels[str(r["name"])] = {"count": count, "sum_us": float(r["sum (us)"]),
                              "type": str(r["kernel_type"])}
row = tb.iloc[0]
print(json.dumps({"hta": "0.5.0", "kernels": kernels,
                  "types": {str(r["kernel_type"]): float(r["sum"]) for _, r in kt.iterrows()},
                  "temporal": {k: float(row[k]) for k in tb.columns if k != "rank"}}))
'''


def _venv(where: Path) -> Path:
    python = where / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    probe = subprocess.run([str(python), "-c", "import hta"], capture_output=True, check=False)
    if probe.returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "-q", HTA], check=True)
    return python


def hta_of(python: Path, trace: Path) -> dict[str, Any]:
    """What HTA says about one trace."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(HELPER)
    out = subprocess.run([str(python), fh.name, str(trace)], capture_output=True, text=True,
                         check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def ours_of(trace: Path) -> dict[str, Any]:
    """What perfstack's torch trace reader says about one trace: its metrics, every kernel
    name's calls and summed time, and the same over the events HTA keeps (launched within
    the profiled steps but the last)."""
    from perfstack_plugins.torchprof.rows import summarize
    from perfstack_plugins.torchprof.trace import TraceAggregate

    from perfstack.report import Layer

    agg = TraceAggregate()
    agg.add_file(trace)
    steps = agg.step_starts()
    kept: dict[str, dict[str, float]] = defaultdict(lambda: {"count": 0, "sum_us": 0.0})
    for k in agg.kernels:
        call = agg.runtime.get(k.correlation)
        if call is not None and len(steps) > 1 and steps[0] <= call.ts < steps[-1]:
            kept[k.name]["count"] += 1
            kept[k.name]["sum_us"] += k.dur
    rows, metrics, _ = summarize(agg)
    kernels: dict[str, dict[str, float]] = defaultdict(lambda: {"count": 0, "sum_us": 0.0})
    for row in rows[Layer.KERNEL]:
        kernels[row.key]["count"] += int(row.values["calls"].value or 0)
        kernels[row.key]["sum_us"] += float(row.values["device"].value or 0) * 1e6
    return {"kernels": dict(kernels), "kept": dict(kept),
            "metrics": {m.name: m.value for m in metrics if m.name.startswith("gpu")}}


def compare(hta: dict[str, Any], ours: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per kernel name that both count alike: does the summed time agree?

    HTA rounds ns timestamps down to µs, which takes up to ``ROUNDING_US`` off a call: a name
    agrees when the sums differ by at most 1%, or by at most that a call. ``max_rel_diff`` is
    the largest relative difference among names whose calls average 100 x ``ROUNDING_US`` or
    more (where the rounding is under 1%)."""
    same, differ, diffs, outside = 0, [], [], []
    for name, h in hta["kernels"].items():
        o = ours.get(name)
        if o is None or o["count"] != h["count"]:
            differ.append((name, h["count"], o["count"] if o else 0))
            continue
        same += 1
        gap = abs(o["sum_us"] - h["sum_us"])
        if gap > max(0.01 * h["sum_us"], h["count"] * ROUNDING_US):
            outside.append((name, o["sum_us"], h["sum_us"]))
        if h["count"] and h["sum_us"] / h["count"] >= 100 * ROUNDING_US:
            diffs.append(gap / h["sum_us"])
    return {"same_count": same, "names": len(hta["kernels"]), "differ": differ,
            "outside": outside, "held": len(diffs), "max_rel_diff": max(diffs, default=0.0)}


def main() -> int:
    """Print the comparison; record HTA's outputs with --record."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "perfstack-hta")
    parser.add_argument("--record", type=Path, metavar="DIR")
    ns = parser.parse_args()
    python = _venv(ns.venv)
    for folder in sorted(p for p in TRACES.iterdir() if p.is_dir()):
        trace = folder / "rank-0.json.gz"
        hta, ours = hta_of(python, trace), ours_of(trace)
        if ns.record is not None:
            ns.record.mkdir(parents=True, exist_ok=True)
            (ns.record / f"{folder.name}.json").write_text(json.dumps(hta, indent=1) + "\n")
        c = compare(hta, ours["kept"])
        t, m = hta["temporal"], ours["metrics"]
        agree = c["same_count"] - len(c["outside"])
        print(f"{folder.name}: {c['same_count']} of {c['names']} kernel names counted alike "
              "(perfstack's events launched in the steps HTA keeps); summed time agrees "
              f"(1%, or HTA's rounding: {ROUNDING_US:g} µs a call) on {agree}; largest "
              f"difference where calls average >= {100 * ROUNDING_US:g} µs ({c['held']} "
              f"names): {100 * c['max_rel_diff']:.3f}%")
        for name, o_sum, h_sum in c["outside"][:5]:
            print(f"    outside: {name[:60]}: perfstack {o_sum:.1f} µs, HTA {h_sum:.1f} µs")
        for name, h_count, o_count in c["differ"][:5]:
            print(f"    differs: {name[:60]}: HTA {h_count} calls, perfstack {o_count}")
        print(f"    HTA temporal: idle {t['idle_time_pctg']:.1f}%, compute "
              f"{t['compute_time_pctg']:.1f}%, non-compute {t['non_compute_time_pctg']:.1f}%")
        print(f"    perfstack:    idle {m.get('gpu_time.idle', 0):.1f}%, compute "
              f"{m.get('gpu_time.compute', 0):.1f}%, communication+memory "
              f"{m.get('gpu_time.communication', 0) + m.get('gpu_time.memory', 0):.1f}%, "
              f"gpu_busy {m.get('gpu_busy', 0):.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
