"""``python -m perfstack``: the same as the ``perfstack`` command."""

import sys

from perfstack.cli import main

sys.exit(main())
