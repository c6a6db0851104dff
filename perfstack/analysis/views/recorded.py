"""What a report of files recorded elsewhere (``perfstack analyze``) says about its ranks:
which were read, and which only in part and why (a backend puts ``read_in_part`` in a rank's
recorded facts: a trace cut short), and which were not read at all and why (unreadable, a
worker that died: ``environment.reading.not_read``). Said on the header's line in every
format, and by the exit code."""

from __future__ import annotations

from typing import Any

from perfstack.report.job.rankrows import said_ranks


def ranks_read(recorded: dict[str, Any]) -> str:
    """Which ranks' files a report of recorded traces holds: "rank 0 read", "ranks 0-3 read",
    "ranks 0, 2 read" (a job's size says how many there were, not how many were read)."""
    ranks = sorted(int(k[4:]) for k in recorded if k.startswith("rank") and k[4:].isdigit())
    if not ranks:
        return "which ranks were read is not known"
    return f"{said_ranks(ranks)} read"


def read_in_part(recorded: dict[str, Any]) -> list[str]:
    """Each process of a report of recorded files that was read in part, and why: "rank 7
    read in part: trace cut short (...)" (a backend says so in its rank's ``read_in_part``)."""
    out = []
    for key, facts in sorted(recorded.items(), key=lambda kv: _rank_order(kv[0])):
        why = facts.get("read_in_part") if isinstance(facts, dict) else None
        if isinstance(why, str) and why:
            who = f"rank {key[4:]}" if key.startswith("rank") and key[4:].isdigit() else key
            out.append(f"{who} read in part: {why}")
    return out


#: Ranks not read named one by one on the header's line; the rest are counted there (the
#: finding lists more, the JSON every one).
NAMED_NOT_READ = 3


def not_read(reading: dict[str, Any]) -> list[str]:
    """Each rank or process of a report of recorded files that was left out, and why:
    "rank-7.json.gz not read: the worker reading it died (...)", the first few of them and
    how many more (``environment.reading.not_read``)."""
    left = [e for e in reading.get("not_read") or [] if isinstance(e, dict)]
    out = [f"{', '.join(str(f) for f in e.get('files') or []) or 'a rank'} not read: "
           f"{e.get('why') or 'unreadable'}" for e in left[:NAMED_NOT_READ]]
    if len(left) > NAMED_NOT_READ:
        out.append(f"and {len(left) - NAMED_NOT_READ} more ranks not read (the findings "
                   "name them)")
    return out


def _rank_order(key: str) -> tuple[int, str]:
    return (int(key[4:]), "") if key.startswith("rank") and key[4:].isdigit() else (1 << 30, key)
