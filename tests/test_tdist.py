"""Student's t p-values without scipy: the same figures as scipy's, which diff's start no
longer imports (with numpy, about 100 ms of every diff)."""

from __future__ import annotations

import math
import random
import subprocess
import sys

from perfstack.analysis.stats import t_pvalue


def test_t_pvalue_agrees_with_scipy_over_a_grid_and_at_random():
    from scipy.special import stdtr

    rng = random.Random(56)
    cases = [(t, df) for df in (1, 2, 3, 4, 5, 8, 10, 30, 100, 1000, 0.7, 13.4)
             for t in (0.0, 0.01, 0.5, 1.0, 1.96, 2.5, 4.0, 10.0, 50.0, -3.0)]
    cases += [(rng.uniform(-12, 12), rng.uniform(0.5, 300)) for _ in range(3000)]
    for t, df in cases:
        want = float(2 * stdtr(df, -abs(t)))
        got = t_pvalue(t, df)
        assert abs(got - want) <= 1e-9 * want + 1e-12, (t, df, got, want)
    assert t_pvalue(math.inf, 5) == 0.0 and t_pvalue(math.nan, 5) == 1.0
    assert t_pvalue(2.0, 0) == 1.0 and t_pvalue(0.0, 7) == 1.0


def test_diff_imports_neither_scipy_nor_numpy(tmp_path):
    code = ("import sys; from perfstack.cli.main import main; "
            "main(['diff', sys.argv[1], sys.argv[1]]); "
            "print(sorted({'scipy', 'numpy'} & set(sys.modules)), file=sys.stderr)")
    from tests.conftest import ROOT

    report = ROOT / "tests/fixtures/reports/v1-busy.json"
    proc = subprocess.run([sys.executable, "-c", code, str(report)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr
