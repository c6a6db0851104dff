"""What one device can reach, as a record: the ``Ceilings`` that the probe measures, a
datasheet gives, the cache and the report hold, and the roofline reads. A leaf: it imports
nothing of perfstack's."""

from __future__ import annotations

from typing import Any

from perfstack.records import datarecord, field


@datarecord
class Ceilings:
    """What one device can reach: FLOP/s per element type, bytes/s, a call's fixed cost.

    ``source`` is ``measured`` (here, by the probe) or ``datasheet`` (a GPU's published
    figures, for traces recorded elsewhere); ``how`` says how each figure was had.
    """

    device: str
    source: str
    peak_flops: dict[str, float]
    bandwidth: float | None
    dispatch_s: float | None = None
    name: str | None = None
    threads: int | None = None
    how: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The ceilings as the report's environment holds them."""
        return {"device": self.device, "source": self.source, "name": self.name,
                "threads": self.threads, "peak_flops": self.peak_flops,
                "bandwidth": self.bandwidth, "dispatch_s": self.dispatch_s, "how": self.how}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ceilings:
        """Read ceilings back from a report or the cache; ValueError when malformed."""
        try:
            peaks = {str(k): float(v) for k, v in dict(data["peak_flops"]).items()
                     if isinstance(v, (int, float)) and v > 0}
            bandwidth = data.get("bandwidth")
            dispatch = data.get("dispatch_s")
            return cls(
                device=str(data.get("device") or "cpu"), source=str(data["source"]),
                peak_flops=peaks,
                bandwidth=float(bandwidth) if isinstance(bandwidth, (int, float))
                and bandwidth > 0 else None,
                dispatch_s=float(dispatch) if isinstance(dispatch, (int, float))
                and dispatch > 0 else None,
                name=data.get("name") if isinstance(data.get("name"), str) else None,
                threads=data.get("threads") if isinstance(data.get("threads"), int) else None,
                how=dict(data["how"]) if isinstance(data.get("how"), dict) else {})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed ceilings: {exc}") from None
