"""Keeps 20 MiB more each step (a list it never empties: memory kept across steps) until
memory runs out; the truth an out-of-memory report must agree with: it dies in ``keep``, the
line that appends, its resident memory rising ~20 MiB a step.

    python grows_until_oom.py [LIMIT_MIB [once]]

With LIMIT_MIB it first limits its own address space to what it has now plus LIMIT_MIB
(``resource.setrlimit``: it then dies of MemoryError); without, it grows until something
else stops it (a cgroup's limit: the kernel's OOM killer). With ``once`` it makes three
steps that keep nothing, then asks for twice the limit at once in ``all_at_once``: one
allocation too big, no floor rising."""

import resource
import sys

import perfstack

STEP_BYTES = 20 << 20


def keep(kept: list[bytearray]) -> None:
    kept.append(bytearray(STEP_BYTES))  # touched: resident, not only reserved


def all_at_once(limit_mib: int) -> bytearray:
    return bytearray(2 * limit_mib << 20)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        with open("/proc/self/statm") as fh:
            size = int(fh.read().split()[0]) * resource.getpagesize()
        limit = size + int(sys.argv[1]) * (1 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if sys.argv[2:] == ["once"]:
        for _ in range(3):
            keep([])
            perfstack.step()
        all_at_once(int(sys.argv[1]))
    kept: list[bytearray] = []
    while True:
        keep(kept)
        perfstack.step()
