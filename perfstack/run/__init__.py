"""The run room: how a session goes, from the command line's options to the report.

- ``driver``: the session's loop (warm-up and baseline runs, one run per backend, the report);
  ``ab`` and ``sweep`` drive several sessions, ``ingest`` reads files recorded elsewhere
  (``perfstack analyze``) through the same assembly.
- ``process`` launches and supervises one child (its process group, signals, timeouts),
  ``strays`` finds what a run left behind, ``signals`` turns SIGTERM and SIGHUP into
  interruptions; ``bootstrap`` runs inside the workload's process (``-m
  perfstack.inprocess.bootstrap``), so this package imports nothing at its top.
- ``filenames``: the names of a run folder's files (a leaf); ``rundir``: the run folder,
  ``RunFolder`` its one reader; ``collecting``: a backend's collect
  step, bounded; ``assembly``: what the report says about the runs (pure functions);
  ``ranks``: which ranks of a torchrun job are profiled (their figures are
  ``perfstack.analysis.distributed``'s).
"""
