"""The machine room: what the machine is and how busy it was.

``environment`` and ``envinfo`` capture the machine a run ran on (``perfstack env`` shows it),
``cpus`` the CPUs a process may use, ``interpreters`` the Python builds found (the GIL
backend's free-threaded one), ``counters`` the hardware counters the kernel offers, ``probe``
and ``load`` how slow and how busy the machine was during each run; ``roofline/`` what it
can reach (``ceilings``: peak FLOP/s per type, memory bandwidth, measured once by
``ceilingprobe`` in a process of its own, and cached; ``datasheets``: the published peaks of
known GPUs for traces recorded elsewhere).
"""
