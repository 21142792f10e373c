import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from admitter.api.duration import (
    DURATION_PATTERN,
    MAX_DURATION,
    format_duration,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "seconds", "canonical"),
    [
        ("90s", 90, "1m30s"),
        ("15m", 900, "15m"),
        ("2h", 7200, "2h"),
        ("7d", 604800, "7d"),
        ("2d12h", 216000, "2d12h"),
        ("1h30m", 5400, "1h30m"),
        (45, 45, "45s"),
        ("0", 0, "0s"),
        ("2.5s", 2.5, "2.5s"),
    ],
)
def test_parse_and_format(text, seconds, canonical):
    assert parse_duration(text) == seconds
    assert format_duration(parse_duration(text)) == canonical


@pytest.mark.parametrize(
    "bad",
    ["-5m", "2 hours", "h", "5x", "", "1h-2m", True, None, -1, "-0", "1e-7", "1e3", "inf",
     "nan", "+5s", "99999d", "1.0001s", 1e-7, float("nan"), float("inf"), "5s\n5s", "٣s"],
)
def test_bad_durations_quote_the_value(bad):
    with pytest.raises(ValueError) as caught:
        parse_duration(bad)
    assert repr(bad) in str(caught.value)


@given(st.integers(min_value=0, max_value=10**8))
def test_format_round_trips(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


@given(st.integers(min_value=0, max_value=int(MAX_DURATION) * 1000))
def test_every_millisecond_value_prints_as_text_it_accepts_again(millis):
    seconds = millis / 1000
    text = format_duration(seconds)
    assert re.fullmatch(DURATION_PATTERN, text)
    assert parse_duration(text) == seconds
