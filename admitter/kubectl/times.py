"""Times a person can read: "at 14:20 (in 42m)", "3h05m ago", from the API's numeric times."""

from __future__ import annotations

import time

_UNITS = ((86400, "d"), (3600, "h"), (60, "m"), (1, "s"))


def span(seconds: float) -> str:
    """A length of time in its two largest units: 42m, 3h05m, 2d04h, 9s."""
    whole = max(0, round(seconds))
    for i, (size, unit) in enumerate(_UNITS[:-1]):
        if whole >= size:
            first, rest = divmod(whole, size)
            smaller, smaller_unit = _UNITS[i + 1]
            second = rest // smaller
            return f"{first}{unit}{second:02d}{smaller_unit}" if second else f"{first}{unit}"
    return f"{whole}s"


def clock(at: float, now: float) -> str:
    """The local wall-clock time of `at`: 14:20 today, "Dec 05 14:20" on another day."""
    moment, today = time.localtime(at), time.localtime(now)
    if moment[:3] == today[:3]:
        return time.strftime("%H:%M", moment)
    return time.strftime("%b %d %H:%M", moment)


def moment(at: float, now: float) -> str:
    """`at` from `now`'s point of view: "at 14:20 (in 42m)" or "at 13:05 (1h15m ago)"."""
    if at >= now:
        return f"at {clock(at, now)} (in {span(at - now)})"
    return f"at {clock(at, now)} ({span(now - at)} ago)"


def age(since: float, now: float) -> str:
    """How long ago, as kubectl's AGE column: 42m, 3h05m."""
    return span(now - since)
