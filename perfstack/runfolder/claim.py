"""Taking a folder for one perfstack session: ``--out-dir`` and ``--job-dir``'s node folder
must be empty and held by no other session, checked and taken in one step (two sessions
started together both passed a check and then one report replaced the other)."""

from __future__ import annotations

import atexit
import contextlib
import os
from pathlib import Path

from perfstack.errors import OutputError

#: The file by which one perfstack session holds a folder it writes (--out-dir, --job-dir's
#: node folder) while it runs: locked (flock) for the session's life, so two sessions started
#: together cannot both take the folder, and a session killed outright holds nothing (the
#: kernel lets its lock go); removed when the session ends.
CLAIM_FILE = ".perfstack-writing"


def claim_empty_folder(path: Path, refusal: str) -> Path:
    """Take ``path`` (created if missing) for this session, atomically: it must be empty and
    held by no other session, else OutputError(``refusal``). The hold ends with the process."""
    import fcntl

    if path.exists() and not path.is_dir():
        raise OutputError(refusal)
    claim = path / CLAIM_FILE
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(claim, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write there ({exc.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise OutputError(refusal) from None
    if any(p.name != CLAIM_FILE for p in path.iterdir()):
        _release(claim, fd)  # held by this session a moment: nothing of it is left there
        raise OutputError(refusal)
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    atexit.register(_release, claim, fd)  # the descriptor stays open, its lock held, till then
    return path


def _release(claim: Path, fd: int) -> None:
    with contextlib.suppress(OSError):
        claim.unlink()
    with contextlib.suppress(OSError):
        os.close(fd)
