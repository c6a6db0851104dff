"""The run room: how a session goes, from the command line's options to the report.

- ``driver``: the session's loop (``phases``: warm-up and baseline runs, one run per backend;
  ``runner``, ``baseline``, ``launch``), ``assembly``: what the report says about the runs
  (pure functions); ``compare/`` drives several sessions (``ab``, ``sweep``) and
  ``recorded/`` reads files recorded elsewhere (``perfstack analyze``) through the same
  assembly.
- ``process`` launches and supervises one child (its process group, signals, timeouts),
  ``strays`` finds what a run left behind, ``collecting`` bounds a backend's collect step.
- A process perfstack did not start (``perfstack.machine.ptrace`` says whether it may look):
  ``attached`` (``perfstack attach``),
  ``capturing`` (``perfstack capture``); ``oomfacts``: a dead run's memory at its end.
- The run folder's names, the folder and a job's ranks are ``perfstack.runfolder``'s; what
  runs inside the workload's process is ``perfstack.inprocess``'s.
"""
