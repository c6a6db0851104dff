"""Pure analyses of reports: statistics (``stats``, ``pairedtest``), the comparison of two
reports (``diff/``), the findings of the core (``rules/``), the roofline, a job's ranks
(``distributed``, ``perrank``, ``straggler``), joining the reports of a job's nodes
(``merge``); and the view every format draws (``view``, its concepts one module each under
``views/``).

Nothing here starts a process or prints; each module takes reports (plain data) and returns
numbers, so it is tested without running a workload.
"""
