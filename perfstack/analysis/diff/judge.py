"""What every comparison in one diff shares: the run-to-run noise, the machine's drift, and
how a change between two separate sessions is told from the machine's own.

``perfstack.analysis.diff`` judges metrics with it, ``perfstack.analysis.diff.rows`` rows.
"""

from __future__ import annotations

from perfstack.analysis.diff.drift import MachineDrift, corrected
from perfstack.analysis.stats import MIN_EFFECT
from perfstack.records import datarecord

#: Between separate sessions, a time that moved by less than this share of the run's wall time
#: is not called a change, whatever its relative size.
SMALL_TIME = 0.01


def one_run_threshold(noise: float) -> float:
    """The smallest relative change of a figure measured in one run per side that counts:
    3x the wall time's run-to-run ``noise``, and never below 2.5x the minimum effect."""
    return max(MIN_EFFECT * 2.5, 3 * noise)


@datarecord
class Judge:
    """What every comparison in one diff shares: pairing, noise and the machine's drift."""

    noise: float | None  # relative run-to-run noise of the wall time
    machine: MachineDrift
    wall_s: float | None = None  # the base's median wall time: the scale of the run

    @property
    def paired(self) -> bool:
        """Whether the two sides' runs alternated (one ``perfstack ab`` session)."""
        return self.machine.paired

    def beyond_sessions(self, change: float, drift: float | None,
                        unit: str) -> tuple[bool | None, float | None, str | None]:
        """Between separate sessions: whether ``change`` exceeds the session noise both as
        measured and with the machine's ``drift`` taken out, in the same direction (True);
        is explained by them (False); or cannot be told from a machine that moved more than
        the noise (None). Also the corrected change and, unless True, why (one line)."""
        limit = self.machine.session_noise
        fixed = corrected(change, drift, unit) if drift is not None else None
        raw_out = abs(change) > limit
        if fixed is None:
            if raw_out:
                return True, None, None
            return False, None, self._within(change, limit)
        if raw_out and abs(fixed) > limit and (fixed > 0) == (change > 0):
            return True, fixed, None
        assert drift is not None
        way = "slower" if drift > 0 else "faster"
        if abs(fixed) <= limit:
            if raw_out:
                return False, fixed, (f"the machine ran {abs(drift):.0%} {way} during NEW; "
                                      f"the {abs(change):.0%} change is within what the machine "
                                      f"moved (±{limit:.0%} between sessions)")
            return False, fixed, self._within(change, limit)
        if abs(drift) > limit:
            return None, fixed, (f"the machine ran {abs(drift):.0%} {way} during NEW, as much "
                                 f"as the change ({100 * change:+.0f}% as measured, "
                                 f"{100 * fixed:+.0f}% corrected): cannot tell; compare in one "
                                 "session with perfstack ab")
        return False, fixed, self._within(change, limit)

    @staticmethod
    def _within(change: float, limit: float) -> str:
        return (f"{abs(change):.1%} is within the ±{limit:.0%} between-session noise "
                "(separate sessions; perfstack ab sees smaller changes)")
