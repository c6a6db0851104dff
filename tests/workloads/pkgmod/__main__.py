"""Run as ``-m pkgmod``: writes what it sees to $ECHO_OUT."""

import json
import os
import sys

with open(os.environ["ECHO_OUT"], "a", encoding="utf-8") as fh:
    fh.write(json.dumps({"name": __name__, "argv": sys.argv, "path0": sys.path[0]}) + "\n")
