"""The ``--ranks`` spec: which ranks of a torchrun job the per-rank backends profile.

``"0"``, ``"all"``, or a list such as ``"0,3"``. One parser for the command line's check, the
driver's choice of rank folders, and the torch backend's in-process hook (this module is
standard-library only, so the workload process can import it).
"""

from __future__ import annotations

ALL = "all"


def parse(spec: str) -> frozenset[int] | None:
    """Return the ranks ``spec`` names, or None for all of them; raise ValueError with the
    reason when it is not a spec."""
    text = spec.strip()
    if text == ALL:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(f"--ranks takes 0, all, or a list like 0,3; got {spec!r}")
    return frozenset(int(p) for p in parts)


def selected(spec: str, rank: int) -> bool:
    """Return whether ``spec`` names ``rank`` (a spec that does not parse names none)."""
    try:
        ranks = parse(spec)
    except ValueError:
        return False
    return ranks is None or rank in ranks


def among(spec: str, present: list[int]) -> list[int]:
    """Return the ranks ``spec`` names among those ``present`` (the global ranks whose
    processes ran on this node), in their order."""
    return [r for r in present if selected(spec, r)]
