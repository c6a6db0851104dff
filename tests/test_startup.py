"""The CLI's start-up path stays light: no torch for --help, show, validate or plugins."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _imported(args: list[str], cwd, whole: bool = False) -> set[str]:
    """The top-level packages (``whole``: the full module names) a command imports."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "perfstack", *args],
                          capture_output=True, text=True, cwd=cwd)
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            names.add(name if whole else name.split(".")[0])
    return names


@pytest.mark.parametrize("args", [["--help"], ["plugins"], ["run", "--help"]])
def test_commands_do_not_import_torch(args):
    assert "torch" not in _imported(args, ROOT)


def test_show_does_not_import_torch(tmp_path):
    """Reading a report of a torch run (a recorded real one: ops, a trace) needs no torch."""
    recorded = ROOT / "tests/fixtures/reports/resnet50.json.gz"
    proc = subprocess.run([sys.executable, "-m", "perfstack", "show", str(recorded)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and "torch_step_time" in proc.stdout, proc.stderr
    assert "torch" not in _imported(["show", str(recorded)], tmp_path)
    assert "torch" not in _imported(["validate", str(recorded)], tmp_path)
    # Nor what only measuring the machine's ceilings needs (issue 55: on a fresh clone,
    # `show` of a small report took 120 ms with them, 107 ms without; 240 modules, 198).
    shown = _imported(["show", str(recorded)], tmp_path, whole=True)
    unneeded = {"importlib.metadata", "hashlib", "subprocess"} & shown
    assert not unneeded, sorted(unneeded)


def test_version():
    out = subprocess.run([sys.executable, "-m", "perfstack", "--version"], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("perfstack ")


#: What `perfstack show` may import beyond the interpreter's own start, for a small report
#: perfstack wrote (read as checked: no validator): 93 modules when measured (2026-11-28;
#: 184, then 120 before: statistics, tempfile, importlib.resources with zipfile, shutil and
#: perfstack.plugin.backend left its path, then dataclasses with inspect, and pluggy); a few more
#: for what a change needs, not dozens. 111 on 2026-11-29: the core's rules and the text
#: format, each a face over 300 lines, became one module a concern (issue 68: 8 modules
#: more, the same code). 105 later that day: every report section a pane, one module a home
#: (issue 68), and a format imports a pane's words and drawing only when the report has
#: that pane (a CPU report leaves the device's, kernels', streams' and ranks' alone). 108
#: after: the report's rank modules and the machine's ceilings became rooms of their own
#: (issue 68), two package faces of a docstring each.
SHOW_MODULES = 108
#: Modules `show` does not use: email, zipfile and decimal came with importlib.metadata,
#: importlib.resources and statistics; tempfile, shutil and subprocess with writing and
#: running; perfstack.plugin.backend and the run's driver with running; dataclasses (and inspect)
#: compiled every model class's methods at import (perfstack.records instead); pluggy (and
#: inspect) comes with the first hook call, which a core format needs none of.
NOT_FOR_SHOW = ("email", "zipfile", "decimal", "fractions", "statistics", "csv", "tempfile",
                "shutil", "subprocess", "importlib.metadata", "importlib.resources",
                "jsonschema_rs", "torch", "pyperf", "perfstack.plugin.backend",
                "perfstack.run.driver", "perfstack_plugins", "dataclasses", "inspect", "pluggy",
                "perfstack.plugin.spec")


def test_show_imports_only_what_it_uses(tmp_path):
    """`perfstack show` of a small report perfstack wrote: its imports counted against a
    budget (the module count is what its start-up costs, on any machine's speed), and none
    of the modules only other commands use. The plugin manifest is made by a first call,
    as a user's first command makes it."""
    env = {**os.environ, "PERFSTACK_CACHE_DIR": str(tmp_path / "cache")}
    report = tmp_path / "report.json"
    fixture = ROOT / "tests/fixtures/reports/v1-busy.json"
    write = ("import sys; from pathlib import Path; from perfstack.report.files import "
             "load_report, save_report; save_report(load_report(Path(sys.argv[1])), "
             "Path(sys.argv[2]))")
    subprocess.run([sys.executable, "-c", write, str(fixture), str(report)], check=True,
                   cwd=tmp_path, env=env)
    count = ("import io, sys; before = set(sys.modules); from perfstack.cli.main import main; "
             "out, sys.stdout = sys.stdout, io.StringIO(); code = main(['show', sys.argv[1]]); "
             "sys.stdout = out; print(code); print(*sorted(set(sys.modules) - before))")
    for _ in range(2):  # the first also writes the plugin manifest
        proc = subprocess.run([sys.executable, "-c", count, str(report)], capture_output=True,
                              text=True, cwd=tmp_path, env=env)
    code, names = proc.stdout.splitlines()
    assert code == "0", proc.stderr
    imported = set(names.split())
    assert len(imported) <= SHOW_MODULES, len(imported)
    unused = sorted(n for n in imported
                    if any(n == m or n.startswith(m + ".") for m in NOT_FOR_SHOW))
    assert not unused, unused


def test_the_start_s_own_summary_agrees_with_statistics():
    """`show`'s header summarises the baseline without `statistics` (its import brings
    fractions and decimal): the median is the same value, the mean and the standard
    deviation agree to within 1e-12 of statistics' exact ones (random series, fixed seed)."""
    import random
    import statistics

    from perfstack.analysis.stats import median, summarize

    rng = random.Random(55)
    for n in (1, 2, 3, 4, 7, 10, 101):
        values = [rng.lognormvariate(0, 1) * 10 ** rng.randint(-6, 3) for _ in range(n)]
        got = summarize(values)
        assert got.median == statistics.median(values) == median(values)
        assert abs(got.mean - statistics.mean(values)) <= 1e-12 * statistics.mean(values)
        if n > 1:
            want = statistics.stdev(values)
            assert got.stdev is not None and abs(got.stdev - want) <= 1e-12 * want
        else:
            assert got.stdev is None
