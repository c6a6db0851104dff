"""Writes what the script sees of itself (name, argv, path[0]) as JSON to $ECHO_OUT."""

import json
import os
import sys

if __name__ == "__main__":
    with open(os.environ["ECHO_OUT"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"name": __name__, "argv": sys.argv, "path0": sys.path[0],
                             "bootstrap_env": "PERFSTACK_BOOTSTRAP" in os.environ}) + "\n")
