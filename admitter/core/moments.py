"""Times in the words a person reads: RFC 3339 for a moment, and how far it is from now.

The core reads no clock: every moment it names is on the snapshot's clock (`Snapshot.now`,
seconds since the epoch in the controller), and "in 42m" is measured from that `now`.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def span(seconds: float) -> str:
    """`42m`, `3h`, `1h30m`, `2d4h`: the two largest units, rounded up (a wait is never
    shorter than it says), `0s` for none."""
    left = max(0, math.ceil(seconds))
    for i, (unit, size) in enumerate(_UNITS):
        if left < size and unit != "s":
            continue
        if unit == "s":
            return f"{left}s"
        smaller, small_size = _UNITS[i + 1]
        whole, rest = divmod(left, size)
        parts = math.ceil(rest / small_size)
        if parts * small_size >= size:
            whole, parts = whole + 1, 0
        return f"{whole}{unit}" + (f"{parts}{smaller}" if parts else "")
    return "0s"


def moment(at: float, now: float) -> str:
    """`2026-12-04T14:20:00Z (in 42m)`, or `(42m ago)` for a moment past."""
    stamp = datetime.fromtimestamp(math.floor(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    when = f"in {span(at - now)}" if at >= now else f"{span(now - at)} ago"
    return f"{stamp} ({when})"


class Dated:
    """A part of a message (`Pending.message`) measured from the cycle's `now`, formatted only
    if the message is read: most are not, and formatting a date is not free."""

    __slots__ = ("at", "now")

    def __init__(self, at: float, now: float) -> None:
        self.at = at
        self.now = now

    def redated(self, now: float) -> Dated:
        """The same part as a message at `now` states it (an answer that stands,
        `standstill`)."""
        raise NotImplementedError


class Moment(Dated):
    """`moment(at, now)`: when, and how far from now."""

    __slots__ = ()

    def __str__(self) -> str:
        return moment(self.at, self.now)

    def redated(self, now: float) -> Dated:
        return Moment(self.at, now)


class Waited(Dated):
    """How long since `at`: `span(now - at)`."""

    __slots__ = ()

    def __str__(self) -> str:
        return span(self.now - self.at)

    def redated(self, now: float) -> Dated:
        return Waited(self.at, now)
