"""Pure analyses of reports: statistics, the time budget, drift between machines, and diff.

Nothing here starts a process or prints; each module takes reports (plain data) and returns
numbers, so it is tested without running a workload.
"""
