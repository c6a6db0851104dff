"""The ``rusage`` backend's command wrapper: ``python -m perfstack_oskit.wrapper OUT -- CMD``.

Runs CMD, passes on the signals perfstack sends (so a timeout still stops the workload), and
writes the resource usage of CMD and everything it started to OUT as JSON. Exits as CMD did:
with its code, or killed by the same signal.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    """Run the command after ``--``; write its resource usage to the file before it."""
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m perfstack_oskit.wrapper OUT -- CMD [ARGS]", file=sys.stderr)
        return 2
    out, command = argv[0], argv[2:]
    start = time.perf_counter()
    child = subprocess.Popen(command)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    code = child.wait()
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    data = {"wall_s": wall, "user_s": usage.ru_utime, "system_s": usage.ru_stime,
            "max_rss_bytes": usage.ru_maxrss * 1024,  # Linux gives KiB
            "voluntary_switches": usage.ru_nvcsw, "involuntary_switches": usage.ru_nivcsw,
            "exit": code}
    tmp = f"{out}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, out)
    if code < 0:  # killed by a signal: end the same way, so perfstack sees what happened
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
