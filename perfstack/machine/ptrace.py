"""Whether this process may look into another one it did not start (``perfstack attach``):
the process as ``/proc`` shows it, and each reason Linux refuses, with its fix.

A sampler reads another process's memory (``process_vm_readv``, or ``ptrace`` to pause it):
the kernel allows that to a process of the same user, unless Yama's
``kernel.yama.ptrace_scope`` narrows it (1: only one's own descendants; 2: only with
``CAP_SYS_PTRACE``; 3: never), and to another user's process only with ``CAP_SYS_PTRACE``
(root has it, unless a container dropped it, as Docker's default does). The decision is a
pure function of those facts (:func:`refusal`), so each case is tested without the machine
having it.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from perfstack import errors
from perfstack.records import datarecord

#: The capability bit of CAP_SYS_PTRACE in /proc/<pid>/status's CapEff.
CAP_SYS_PTRACE = 19


@datarecord(frozen=True)
class Target:
    """A running process, as ``/proc`` shows it."""

    pid: int
    uid: int
    argv: list[str]
    cwd: str | None  # None where /proc does not show it to this user
    state: str  # the kernel's one-letter state: R, S, D, T, Z...
    ppid: int


def _status(pid: int | str) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text("utf-8", errors="replace")
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in
                                                   text.splitlines())}


def target(pid: int) -> Target:
    """The process ``pid``; InputNotFound where there is none (or it has exited)."""
    if pid <= 0:
        raise errors.UsageError(f"{pid} is not a process id")
    try:
        status = _status(pid)
    except FileNotFoundError:
        raise errors.InputNotFound(f"no process {pid} (ps lists the running ones)") from None
    except OSError as exc:
        raise errors.AttachRefused(f"process {pid} cannot be read: {exc.strerror}") from None
    state = status.get("State", "?")[:1]
    if state in ("Z", "X"):
        raise errors.InputNotFound(f"process {pid} has exited (it is a zombie waiting for "
                                   "its parent)")
    try:
        argv = [a.decode("utf-8", "replace") for a in
                Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        argv = []
    try:
        cwd: str | None = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        cwd = None
    return Target(pid, int(status.get("Uid", "0").split()[1]), argv, cwd, state,
                  int(status.get("PPid", "0")))


def _has_ptrace_capability() -> bool:
    try:
        return bool(int(_status("self").get("CapEff", "0"), 16) >> CAP_SYS_PTRACE & 1)
    except (OSError, ValueError):
        return os.geteuid() == 0


def ptrace_scope() -> int | None:
    """Yama's ``kernel.yama.ptrace_scope`` (0-3), or None where the kernel has no Yama."""
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip())
    except (OSError, ValueError):
        return None  # no Yama: the classic rule (same user, or the capability)


def _descends_from_us(t: Target) -> bool:
    ppid, me = t.ppid, os.getpid()
    for _ in range(64):
        if ppid == me:
            return True
        if ppid <= 1:
            return False
        try:
            ppid = int(_status(ppid).get("PPid", "0"))
        except (OSError, ValueError):
            return False
    return False


def refusal(*, me_uid: int, capable: bool, scope: int | None, target_uid: int,
            descendant: bool, pid: int, owner: str, me: str, root: bool) -> str | None:
    """Why the kernel will refuse this process to look into ``pid`` (one line with the
    fix), or None where it allows it. ``capable``: this process holds CAP_SYS_PTRACE;
    ``scope``: Yama's ptrace_scope (None: no Yama); ``descendant``: ``pid`` descends from
    this process; ``root``: this process runs as root (a root without the capability is a
    container that dropped it)."""
    if scope == 3:
        return ("ptrace is disabled on this machine (kernel.yama.ptrace_scope=3) until it "
                "reboots with a lower setting: no process can be attached to")
    no_cap = ("this container does not give root CAP_SYS_PTRACE: start it with "
              "--cap-add SYS_PTRACE (docker/podman), or add SYS_PTRACE to the pod's "
              "securityContext.capabilities")
    if target_uid != me_uid and not capable:
        if root:
            return f"process {pid} belongs to {owner}; {no_cap}"
        return (f"process {pid} belongs to {owner} and perfstack runs as {me}: run "
                f"'perfstack attach' as {owner}" + (", or as root (sudo)" if target_uid else ""))
    if scope == 2 and not capable:
        return (no_cap if root else "kernel.yama.ptrace_scope=2 lets only a process with "
                "CAP_SYS_PTRACE attach: run 'perfstack attach' as root (sudo)")
    if scope == 1 and not capable and not descendant:
        return (no_cap if root else f"kernel.yama.ptrace_scope=1 lets a process attach only "
                f"to its own children, and process {pid} is not perfstack's: run 'perfstack "
                "attach' as root (sudo), or allow it with 'sudo sysctl "
                "kernel.yama.ptrace_scope=0'")
    return None


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def check(t: Target) -> None:
    """Raise AttachRefused, with the fix, where this process may not look into ``t``."""
    if t.pid == os.getpid():
        raise errors.UsageError("perfstack cannot attach to itself")
    why = refusal(me_uid=os.geteuid(), capable=_has_ptrace_capability(), scope=ptrace_scope(),
                  target_uid=t.uid, descendant=_descends_from_us(t), pid=t.pid,
                  owner=_user(t.uid), me=_user(os.geteuid()), root=os.geteuid() == 0)
    if why is not None:
        raise errors.AttachRefused(why)


def python_in(t: Target) -> bool | None:
    """Whether ``t`` runs Python: its program is an interpreter, or it loaded libpython (an
    embedded one: uWSGI, a C++ host); None where its memory map is not readable here."""
    try:
        exe = os.path.basename(os.readlink(f"/proc/{t.pid}/exe"))
    except OSError:
        exe = ""
    if "python" in exe.lower() or exe.startswith("pypy"):
        return True
    try:
        with open(f"/proc/{t.pid}/maps", "rb") as fh:
            return any(b"libpython" in line for line in fh)
    except OSError:
        return None


def _denied(pid: int) -> str | None:
    """The file of ``pid``'s the kernel refuses this process (its program's link, then its
    memory map: what ptrace's read check guards, and what a sampler reads first), or None."""
    try:
        os.readlink(f"/proc/{pid}/exe")
        with open(f"/proc/{pid}/maps", "rb") as fh:
            fh.read(1)
    except PermissionError as exc:
        return str(exc.filename)
    except OSError:
        return None
    return None


def check_python(t: Target) -> None:
    """Raise AttachRefused where ``t`` is plainly not a Python process, or where the kernel
    lets it not be read though the ptrace rules allowed it (``check``)."""
    name = os.path.basename(t.argv[0]) if t.argv else "?"
    if python_in(t) is False:
        raise errors.AttachRefused(f"process {t.pid} ({name}) is not a Python process: "
                                   "neither its program nor a library it loaded is Python's")
    denied = _denied(t.pid)
    if denied is not None:
        raise errors.AttachRefused(
            f"the kernel refuses to let process {t.pid} ({name}) be read here ({denied}: "
            "permission denied), though its user and ptrace's rules allow it: it is protected "
            "(a setuid or non-dumpable program, an init, a security module's rule; root needs "
            "CAP_SYS_PTRACE for such a process), and no sampler could read it either")


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie does not)."""
    try:
        return _status(pid).get("State", "Z")[:1] not in ("Z", "X")
    except OSError:
        return False
