"""Pure analyses of reports: statistics, the time budget, drift between machines, the
roofline, and diff; and the views every format draws (``view`` with ``layerview``,
``deviceview``, ``kernels``, ``streamview``, ``stepview``, ``roofview``).

Nothing here starts a process or prints; each module takes reports (plain data) and returns
numbers, so it is tested without running a workload.
"""
