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
     "nan", "+5s", "99999d", float("nan"), float("inf"), "5s\n5s", "٣s"],
)
def test_bad_durations_quote_the_value(bad):
    with pytest.raises(ValueError) as caught:
        parse_duration(bad)
    assert repr(bad) in str(caught.value)


@given(st.integers(min_value=0, max_value=10**8))
def test_format_round_trips(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


@given(st.one_of(st.floats(min_value=0, max_value=MAX_DURATION),
                 st.integers(min_value=0, max_value=int(MAX_DURATION))))
def test_every_accepted_number_prints_as_text_that_reads_back_the_same(seconds):
    text = format_duration(parse_duration(seconds))
    assert re.fullmatch(DURATION_PATTERN, text)
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("seconds", "text"), [(1e-7, "0.0000001s"), (-0.0, "0s"),
                                               (110.97080559289148, "1m50.97080559289148s")])
def test_small_and_precise_numbers_print_without_exponent_or_sign(seconds, text):
    assert format_duration(parse_duration(seconds)) == text
