"""Counting a child process's instructions with the kernel's perf events, no tool needed.

The machine-speed probe says whether the machine changed; the instruction count says whether
the work did: the same program on the same input retires nearly the same number of
instructions however busy the machine is. perfstack opens one counter per run on the child it
started (``perf_event_open`` on its pid, inherited by every thread and process the workload
starts afterwards, user space only) and reads it after the child has been reaped, when every
inherited count has been folded back in.

Many machines cannot count (virtual machines without a virtual PMU, containers with
``perf_event_paranoid`` too high, other operating systems): then the count is unknown, with the
kernel's reason, never zero.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

from perfstack.records import datarecord

#: perf_event_open's system call number per machine (asm/unistd.h).
SYSCALL = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}

#: (type, config) of the events used here (linux/perf_event.h).
HARDWARE_INSTRUCTIONS = (0, 1)  # PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS
SOFTWARE_TASK_CLOCK = (1, 1)  # PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK (ns)

_ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: every kernel since 2.6.31 accepts it
_INHERIT = 1 << 1
_EXCLUDE_KERNEL = 1 << 5
_EXCLUDE_HV = 1 << 6


class CounterUnavailable(Exception):
    """This machine or process cannot count the event; the message says why."""


@datarecord
class Counter:
    """An open counter on one process (and everything it starts from now on)."""

    fd: int
    event: tuple[int, int]

    def read(self) -> int:
        """Return the count so far (complete once the process and its children are reaped)."""
        return int(struct.unpack("Q", os.read(self.fd, 8))[0])

    def close(self) -> None:
        """Release the counter."""
        os.close(self.fd)


def _syscall() -> tuple[ctypes.CDLL, int]:
    number = SYSCALL.get(platform.machine())
    if number is None or not platform.system() == "Linux":
        raise CounterUnavailable(f"perf events are not supported on {platform.system()} "
                                 f"{platform.machine()} by perfstack")
    return ctypes.CDLL(None, use_errno=True), number


def open_counter(pid: int, event: tuple[int, int] = HARDWARE_INSTRUCTIONS) -> Counter:
    """Return a counter of ``event`` in user space on ``pid``, inherited by its children.

    Raise CounterUnavailable with the kernel's reason when it cannot be counted here.
    """
    libc, number = _syscall()
    attr = struct.pack("IIQQQQQIIQ", event[0], _ATTR_SIZE, event[1], 0, 0, 0,
                       _INHERIT | _EXCLUDE_KERNEL | _EXCLUDE_HV, 0, 0, 0)
    buffer = ctypes.create_string_buffer(attr, _ATTR_SIZE)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(number, buffer, ctypes.c_int(pid), ctypes.c_int(-1), ctypes.c_int(-1),
                      ctypes.c_ulong(0))
    if fd < 0:
        err = ctypes.get_errno()
        raise CounterUnavailable(_explain(err))
    return Counter(int(fd), event)


def _explain(err: int) -> str:
    import errno

    reason = os.strerror(err)
    if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
        return f"this machine cannot count instructions ({reason}; no hardware counters " \
               "offered, as in many virtual machines)"
    if err in (errno.EACCES, errno.EPERM):
        return f"not allowed to count the workload's instructions ({reason}): lower " \
               "/proc/sys/kernel/perf_event_paranoid to 2 or less, or run as root"
    return f"perf_event_open failed: {reason}"
