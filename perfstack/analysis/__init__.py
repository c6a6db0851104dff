"""Pure analyses of reports: statistics (``stats``, ``pairedtest``), the comparison of two
reports (``diff/``), the findings of the core (``rules/``), the roofline, a job of many ranks
(``job/``: each rank's figures, the stragglers, the collectives' wait, joining the reports of
a job's nodes); and the view every format draws (``view``: each pane's figures under
``panes/``, the page around them under ``views/``).

Nothing here starts a process or prints; each module takes reports (plain data) and returns
numbers, so it is tested without running a workload.
"""
