"""Durations as people write them in scenario files and annotations: `90s`, `15m`, `2d12h`, `0`.

One canonical form, parsed and printed here only: whole units largest first, a fraction only
on seconds, never a sign or an exponent. Every value `parse_duration` accepts prints as text
it reads back to the same float (and the CRD pattern matches), so a Job's `min-runtime` cannot
pass the webhook and then render into a Workload the API server rejects.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(d|h|m|s)")
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?|([0-9]+(\.[0-9]+)?(d|h|m|s))+)$"
"""ASCII digits only: the API server reads the CRD pattern with RE2, and Python's `\\d` also
matches other scripts' digits."""
_TEXT = re.compile(DURATION_PATTERN)
MAX_DURATION = 3650 * 86400.0
"""Ten years: no cycle, window or protected runtime spans longer, and timestamps a duration
is added to stay far from datetime's year-9999 limit."""
_EXPECTED = "expected e.g. 90s, 15m, 2h, 2d12h"


def parse_duration(value: Any) -> float:
    """Seconds from `2h`, `1h30m`, `7d`, `45` (plain seconds); ValueError quotes the input.

    No sign, exponent, `inf` or `nan`: text must match `DURATION_PATTERN`."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{value!r} is not a duration ({_EXPECTED})")
    if isinstance(value, str):
        text = value.strip()
        if not _TEXT.match(text):
            raise ValueError(f"{value!r} is not a duration ({_EXPECTED})")
        parts = _PART.findall(text) or [(text, "s")]
        seconds = sum((Decimal(n) * _UNITS[u] for n, u in parts), Decimal(0))
    else:
        seconds = Decimal(repr(float(value)))
    if not seconds.is_finite() or not 0 <= seconds <= MAX_DURATION:
        raise ValueError(
            f"{value!r} is not a duration admitter accepts: it must be between 0 and "
            f"{format_duration(MAX_DURATION)}"
        )
    return float(seconds) + 0.0  # -0.0 becomes 0.0


def format_duration(seconds: float) -> str:
    """Canonical text: largest units first, `0s` for zero, fractions only on seconds, written
    out in full (`0.0000001s`, never `1e-07s`)."""
    exact = Decimal(repr(float(seconds)))  # the shortest decimal that reads back as `seconds`
    if exact == 0:
        return "0s"
    whole = int(exact)
    fraction = exact - whole
    text = ""
    for unit, size in _UNITS.items():
        if unit == "s":
            break
        count, whole = divmod(whole, size)
        if count:
            text += f"{count}{unit}"
    if fraction:
        text += f"{(whole + fraction).normalize():f}s"
    elif whole:
        text += f"{whole}s"
    return text


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN}),
]
"""A duration field: accepts `90m`, `2d12h` or seconds, serialises as canonical text."""
