"""Per-runtime counters and transfer trace: the evidence behind ``backend.stats()``.

Exactly one key contains "sync": ``synchronizations`` counts true host waits on a stream or
device. Tests prove paths from these counters and the trace, never from timing.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

STAT_KEYS: tuple[str, ...] = (
    "synchronizations",
    "downloads",
    "uploads",
    "d2d_copies",
    "peer_copies",
    "events_recorded",
    "leases_pending",
    "leases_released",
    "debug_waits",
    "queue_full_waits",
)


@dataclass(frozen=True)
class TransferRecord:
    """One data movement: ``kind`` is upload, download, d2d, same_device or peer."""

    kind: str
    nbytes: int
    src: str
    dst: str
    path: str = ""


class Counters:
    """Mutable counters keyed by ``STAT_KEYS`` plus a bounded transfer trace."""

    def __init__(self, trace_length: int = 4096) -> None:
        self.values: dict[str, int] = dict.fromkeys(STAT_KEYS, 0)
        self.trace: deque[TransferRecord] = deque(maxlen=trace_length)

    def add(self, key: str, n: int = 1) -> None:
        """Add ``n`` to counter ``key``."""
        self.values[key] += n

    def record(self, record: TransferRecord) -> None:
        """Append a transfer to the trace (the oldest drops out when full)."""
        self.trace.append(record)

    def snapshot(self) -> dict[str, int]:
        """A copy of the counter values."""
        return dict(self.values)


__all__ = ["STAT_KEYS", "Counters", "TransferRecord"]
