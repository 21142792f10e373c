"""Moments and spans as a person reads them in a pending reason."""

from admitter.core.moments import moment, span


def test_spans_keep_the_two_largest_units_rounded_up():
    assert [span(s) for s in (0, 1, 59, 60, 61, 2520, 3600, 5400, 5401, 90000)] == [
        "0s", "1s", "59s", "1m", "1m1s", "42m", "1h", "1h30m", "1h31m", "1d1h"]


def test_a_moment_is_rfc3339_with_its_distance_from_now():
    assert moment(1_796_350_000, 1_796_347_480) == "2026-12-04T02:06:40Z (in 42m)"
    assert moment(1_796_347_480, 1_796_350_000) == "2026-12-04T01:24:40Z (42m ago)"
