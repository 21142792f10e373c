"""The plugin's times read as a person says them, in the two largest units."""

from __future__ import annotations

import time

import pytest

from admitter.kubectl.times import moment, span


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (9.4, "9s"), (60, "1m"), (90, "1m30s"), (42 * 60, "42m"),
    (3 * 3600 + 5 * 60 + 59, "3h05m"), (2 * 86400 + 4 * 3600, "2d04h"), (86400, "1d"),
    (-5, "0s"),
])
def test_span_names_the_two_largest_units(seconds: float, text: str) -> None:
    assert span(seconds) == text


def test_moment_says_when_and_how_far_from_now() -> None:
    now = time.mktime((2026, 12, 4, 13, 38, 0, 0, 0, -1))
    assert moment(now + 42 * 60, now) == "at 14:20 (in 42m)"
    assert moment(now - 3600, now) == "at 12:38 (1h ago)"
    assert moment(now + 86400, now) == "at Dec 05 13:38 (in 1d)"
