"""What a big job keeps of each rank besides its rows and figures, once folded.

A rank's records hold, beside the rows (``perfstack.report.job.rankfold``) and the figures
(``perfstack.report.job.rankcolumns``), its facts (device properties...), its notes, its files
and its findings. A job of thousands of ranks keeps no record a rank: :class:`Rest` takes
these out of each record as it is folded, each with the record's place, and lists them at the
end in the order a small job's are, a note every rank repeats once, with its ranks. Its files
are listed only for the ranks kept whole (``RankColumns``): every rank's files are the
report's ``run.analyzed``.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import Any

from perfstack.plugin.backend import Collected, Recorded
from perfstack.records import datarecord, field
from perfstack.report import Finding
from perfstack.report.job.rankfold import Position
from perfstack.report.job.rankrows import said_ranks


@datarecord
class Rest:
    """A big job's ranks' facts, notes, files and findings, each with its record's place."""

    facts: list[tuple[Position, int, dict[str, Any]]] = field(default_factory=list)
    #: each note: where it first appeared, and its ranks (a note most ranks repeat is held
    #: once, with a number a rank)
    notes: dict[str, tuple[Position, array[int]]] = field(default_factory=dict)
    findings: list[tuple[Position, Finding]] = field(default_factory=list)

    def take(self, rank: int, at: Position, recorded: Recorded) -> None:
        """Take the facts, notes, files and findings out of one rank's record (``at``: its
        place in the job); its rows and figures are left in it."""
        collected = recorded.collected
        if recorded.environment:
            self.facts.append((at, rank, recorded.environment))
            recorded.environment = {}
        for i, note in enumerate(collected.notes):
            self.note(note, (*at, i), (rank,))
        for finding in collected.findings:
            finding.title = f"[rank {rank}] {finding.title}"
            self.findings.append((at, finding))
        collected.notes, collected.artifacts, collected.findings = [], {}, []

    def note(self, note: str, at: Position, ranks: Iterable[int]) -> None:
        """Note ``note`` of ``ranks``, first seen at ``at``."""
        first, held = self.notes.get(note, (at, array("q")))
        held.extend(ranks)
        self.notes[note] = (min(first, at), held)

    def merge(self, other: Rest) -> None:
        """Take in another fold's (of other ranks)."""
        self.facts += other.facts
        for note, (at, ranks) in other.notes.items():
            self.note(note, at, ranks)
        self.findings += other.findings

    def listed(self, out: Collected, recorded: dict[str, dict[str, Any]]) -> None:
        """Each rank's facts into ``recorded`` ("rankN"), its notes (each once, with its
        ranks) and findings into ``out``, in the order of their records."""
        for _, rank, facts in sorted(self.facts, key=lambda f: (f[0], f[1])):
            key = f"rank{rank}"  # (shared with equal ranks' facts while no other adds to it)
            recorded[key] = {**recorded[key], **facts} if key in recorded else facts
        for note, (_, ranks) in sorted(self.notes.items(), key=lambda kv: kv[1][0]):
            out.notes.append(f"{said_ranks(ranks)}: {note}")
        out.findings += [f for _, f in sorted(self.findings, key=lambda af: af[0])]
