"""The ``perfstack`` command: ``main`` parses the command line and dispatches to one module
per command. Only this package prints to the user and chooses exit codes (``common``)."""

import sys as _sys

from perfstack import signals as _signals

# First thing the command does: a signal in the import window that follows is recorded and
# acted on by main() (exit 128 + the signal), not the interpreter's kill.
_signals.defer_early(_sys.argv[0] if _sys.argv else "")
