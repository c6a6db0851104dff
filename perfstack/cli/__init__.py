"""The ``perfstack`` command: ``main`` parses the command line and dispatches to one module
per command. Only this package prints to the user and chooses exit codes (``common``)."""
