"""drift_work.py with --more, as a second script for ``perfstack ab``."""

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.argv.append("--more")
    runpy.run_path(str(Path(__file__).with_name("drift_work.py")), run_name="__main__")
