"""``python -m perfstack``: the same as the ``perfstack`` command."""

from perfstack.cli.main import console

console()
