"""Durations as people write them in scenario files and annotations: `90s`, `15m`, `2d12h`, `0`."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+(?:\.\d+)?)(d|h|m|s)")
DURATION_PATTERN = r"^(\d+(\.\d+)?|(\d+(\.\d+)?(d|h|m|s))+)$"


def parse_duration(value: Any) -> float:
    """Seconds from `2h`, `1h30m`, `7d`, `45` (plain seconds); ValueError quotes the input."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration (expected e.g. 90s, 15m, 2h, 2d12h)")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            parts = _PART.findall(text)
            if not text or "".join(n + u for n, u in parts) != text:
                raise ValueError(
                    f"{value!r} is not a duration (expected e.g. 90s, 15m, 2h, 2d12h)"
                ) from None
            seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    else:
        raise ValueError(f"{value!r} is not a duration (expected e.g. 90s, 15m, 2h, 2d12h)")
    if seconds < 0 or seconds != seconds or seconds == float("inf"):
        raise ValueError(f"{value!r} is not a duration: it must be finite and not negative")
    return seconds


def format_duration(seconds: float) -> str:
    """Canonical text: largest units first, `0s` for zero, fractions only on seconds."""
    if seconds == 0:
        return "0s"
    whole = int(seconds)
    text = ""
    for unit, size in _UNITS.items():
        if unit == "s":
            break
        count, whole = divmod(whole, size)
        if count:
            text += f"{count}{unit}"
    rest = whole + (seconds - int(seconds))
    if rest:
        text += f"{rest:g}s"
    return text


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN}),
]
"""A duration field: accepts `90m`, `2d12h` or seconds, serialises as canonical text."""
