"""Where perfstack keeps what it can always make again (the plugin manifest, the memo of
reports it checked as it wrote them): ``$PERFSTACK_CACHE_DIR``, else
``$XDG_CACHE_HOME/perfstack`` (``~/.cache/perfstack``)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "PERFSTACK_CACHE_DIR"


def cache_folder() -> Path:
    """Return perfstack's cache folder (it may not exist yet)."""
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".cache")
        folder = os.path.join(base, "perfstack")
    return Path(folder)
