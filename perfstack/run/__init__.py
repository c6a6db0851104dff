"""The run room: how a session goes, from the command line's options to the report.

- ``driver``: the session's loop (``phases``: warm-up and baseline runs, one run per backend;
  ``runner``, ``baseline``), ``assembly``: what the report says about the runs
  (pure functions); ``compare/`` drives several sessions (``ab``, ``sweep``) and
  ``recorded/`` reads files recorded elsewhere (``perfstack analyze``) through the same
  assembly.
- ``child/``: one run's child process (``launch`` prepares it, ``process`` supervises it: its
  process group, signals, timeouts; ``oomfacts``: its memory at an unclean end; ``strays``:
  what it left behind); ``collecting`` bounds a backend's collect step.
- A process perfstack did not start (``perfstack.machine.ptrace`` says whether it may look):
  ``attached`` (``perfstack attach``),
  ``capturing`` (``perfstack capture``).
- The run folder's names, the folder and a job's ranks are ``perfstack.runfolder``'s; what
  runs inside the workload's process is ``perfstack.inprocess``'s.
"""
