"""The B side of ab_work for ``perfstack ab``: the same script with 30% more matrix products.

``perfstack ab`` passes the same arguments to both sides, so the difference lives here.
"""

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.argv.append("--slow")
    runpy.run_path(str(Path(__file__).with_name("ab_work.py")), run_name="__main__")
