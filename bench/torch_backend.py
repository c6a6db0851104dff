"""The torch backend's costs, measured side by side.

    .venv/bin/python bench/torch_backend.py overhead [--rounds 5]
    .venv/bin/python bench/torch_backend.py ingest [--steps 3000] [--hta VENV]

overhead: wall time of each workload run plainly, under torch.profiler by hand (the same
settings: bench/hand_profile.py), and under perfstack's torch backend (its own run's wall time
from the report), interleaved round by round; medians and ratios to the plain run.

ingest: profiles many training steps to make a large trace (200 MB or more), then reads it
with perfstack's streaming aggregate and, as the reference, with json.load; each in its own
process so peak memory (max RSS) is its own. Prints MB/s and peak memory, and their ratios.
With ``--hta VENV``, also with Holistic Trace Analysis 0.5 (its TraceAnalysis parses the
trace into dataframes), installed into a venv of its own, and the ratios to it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import perfstack_command, spread

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
WORKLOADS = {
    "resnet50": [str(ROOT / "workloads/resnet50.py"), "--num-batches", "6"],
    "bert": [str(ROOT / "workloads/bert.py"), "--num-batches", "6"],
}


def _timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _perfstack_torch_wall(argv: list[str], report: Path, work: Path) -> float:
    """The torch backend's run of ``argv`` under the installed perfstack: its wall time."""
    subprocess.run([perfstack_command(), "run", "-q", "--plugins", "torch", "--repeat", "1",
                    "--warmup", "0", "-o", str(report), argv[0], "--", *argv[1:]], cwd=work,
                   check=True, stderr=subprocess.DEVNULL)
    data = json.loads(report.read_text())
    return float(next(r["wall_s"] for r in data["run"]["runs"] if r["id"] == "torch"))


def overhead(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, argv in WORKLOADS.items():
            plain, hand, ours = [], [], []
            for i in range(rounds):
                order = ["plain", "hand", "ours"]
                for side in order if i % 2 == 0 else reversed(order):  # alternated
                    if side == "plain":
                        plain.append(_timed([PY, *argv], work))
                    elif side == "hand":
                        hand.append(_timed([PY, str(ROOT / "bench/hand_profile.py"), tmp,
                                            *argv], work))
                    else:
                        ours.append(_perfstack_torch_wall(argv, work / f"{name}-{i}.json",
                                                          work))
            print(f"\n{name} (n={rounds}; medians; ratios within each round: min / median / "
                  "max)")
            for label, values in (("plain python", plain), ("torch.profiler by hand", hand),
                                  ("perfstack torch backend", ours)):
                med = statistics.median(values)
                per_round = [v / p for v, p in zip(values, plain, strict=True)]
                print(f"  {label:<26} {med:7.3f} s  {spread(per_round)} plain")
            print("  perfstack vs by hand: "
                  f"{spread([o / h for o, h in zip(ours, hand, strict=True)], '.3f')}")


def _peak_of(code: str, path: Path, python: str = PY) -> tuple[float, float, str]:
    out = subprocess.run([python, "-c", code, str(path)], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split()
    return float(out[0]), float(out[1]), " ".join(out[2:])


READ_OURS = """
import resource, sys, time
from pathlib import Path
from perfstack_plugins.torchprof.trace import TraceAggregate
from perfstack_plugins.torchprof.rows import summarize
t = time.perf_counter(); agg = TraceAggregate(); agg.add_file(Path(sys.argv[1]))
rows, metrics, notes = summarize(agg)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
      agg.events, "events", len(rows[list(rows)[0]]), "framework rows")
"""
READ_JSON = """
import json, resource, sys, time
t = time.perf_counter(); data = json.load(open(sys.argv[1]))
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
      len(data["traceEvents"]), "events")
"""
BASE = """
import resource; import perfstack_plugins.torchprof.trace, json
print(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "interpreter")
"""


READ_HTA = """
import os, resource, shutil, sys, tempfile, time, warnings
warnings.filterwarnings("ignore")
from hta.trace_analysis import TraceAnalysis
folder = tempfile.mkdtemp()
os.symlink(sys.argv[1], os.path.join(folder, "rank-0.json"))
t = time.perf_counter(); ta = TraceAnalysis(trace_dir=folder)
events = sum(len(df) for df in ta.t.get_all_traces().values())
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
      events, "events kept")
"""


def ingest(steps: int, hta_venv: Path | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "big.json"
        make = f"""
import torch
from torch.profiler import profile, ProfilerActivity
model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)])
opt = torch.optim.SGD(model.parameters(), lr=0.01); x = torch.randn(8, 64)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    for _ in range({steps}):
        opt.zero_grad(); model(x).sum().backward(); opt.step()
prof.export_chrome_trace({str(trace)!r})
"""
        start = time.perf_counter()
        subprocess.run([PY, "-c", make], check=True, stderr=subprocess.DEVNULL)
        size = trace.stat().st_size / 1e6
        took = time.perf_counter() - start
        print(f"trace: {size:.0f} MB from {steps} steps (made in {took:.0f} s)")
        _, base_rss, _ = _peak_of(BASE, trace)
        rows = []
        readers = [("perfstack streaming aggregate", READ_OURS, PY),
                   ("json.load (reference)", READ_JSON, PY)]
        if hta_venv is not None:
            sys.path.insert(0, str(ROOT / "bench"))
            from hta_compare import _venv

            readers.append(("HTA 0.5 TraceAnalysis", READ_HTA, str(_venv(hta_venv))))
        for label, code, python in readers:
            secs, rss, what = _peak_of(code, trace, python)
            rows.append((label, secs, rss))
            print(f"  {label:<30} {secs:6.1f} s  {size / secs:6.1f} MB/s  "
                  f"peak {rss / 2**20:7.0f} MiB (+{(rss - base_rss) / 2**20:.0f} over the "
                  f"interpreter)  {what}")
        (_, s1, r1), (_, s2, r2) = rows[:2]
        print(f"  ratios, ours / json.load: time {s1 / s2:.2f}x, peak memory {r1 / r2:.2f}x, "
              f"memory above the interpreter {(r1 - base_rss) / (r2 - base_rss):.2f}x")
        if len(rows) > 2:
            _, s3, r3 = rows[2]
            print(f"  ratios, ours / HTA: time {s1 / s3:.2f}x ({s3 / s1:.1f}x faster), peak "
                  f"memory {r1 / r3:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("overhead").add_argument("--rounds", type=int, default=5)
    reader = sub.add_parser("ingest")
    reader.add_argument("--steps", type=int, default=3000)
    reader.add_argument("--hta", type=Path, metavar="VENV",
                        help="also read the trace with HTA 0.5, installed into VENV (made "
                        "when missing; no torch needed)")
    args = parser.parse_args()
    if args.what == "overhead":
        overhead(args.rounds)
    else:
        ingest(args.steps, args.hta)


if __name__ == "__main__":
    main()
