from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from admitter.api.quantity import (
    MAX_QUANTITY,
    format_quantity,
    from_base_units,
    parse_quantity,
    to_base_units,
)


@pytest.mark.parametrize(
    ("text", "value", "canonical"),
    [
        ("500m", Decimal("0.5"), "500m"),
        ("64Gi", Decimal(64 * 2**30), "64Gi"),
        (8, Decimal(8), 8),
        ("1.5Gi", Decimal(3 * 2**29), "1536Mi"),
        ("2k", Decimal(2000), "2k"),
        ("1e3", Decimal(1000), "1k"),
        (0.25, Decimal("0.25"), "250m"),
        (-1, Decimal(-1), -1),
        ("0", Decimal(0), 0),
        ("96", Decimal(96), 96),
    ],
)
def test_parse_and_canonical_form(text, value, canonical):
    assert parse_quantity(text) == value
    assert format_quantity(parse_quantity(text)) == canonical


@pytest.mark.parametrize("bad", ["eight", "8 Gi", "1.5.5", "", True, None, [8], "0.0001"])
def test_bad_quantities_quote_the_value(bad):
    with pytest.raises(ValueError, match=r"quantity|precise") as caught:
        parse_quantity(bad)
    assert repr(bad) in str(caught.value)


def test_base_units():
    assert to_base_units("cpu", parse_quantity("500m")) == 500
    assert to_base_units("memory", parse_quantity("1Ki")) == 1024
    assert to_base_units("nvidia.com/gpu", parse_quantity(8)) == 8
    assert from_base_units("cpu", 1500) == Decimal("1.5")
    with pytest.raises(ValueError, match=r"nvidia.com/gpu must be a whole number, got 500m"):
        to_base_units("nvidia.com/gpu", parse_quantity("0.5"))


@given(st.integers(min_value=-1, max_value=int(MAX_QUANTITY)))
def test_canonical_form_round_trips_integers(value):
    assert parse_quantity(format_quantity(Decimal(value))) == value


@pytest.mark.parametrize("bad", ["1e30", "2Ei", "-1e19", 10**40, float("inf"), float("nan")])
def test_quantities_beyond_1ei_are_refused_with_the_value(bad):
    with pytest.raises(ValueError, match="out of range: admitter accepts quantities up to 1Ei"):
        parse_quantity(bad)


@given(st.integers(min_value=0, max_value=10**9))
def test_canonical_form_round_trips_millis(millis):
    amount = Decimal(millis) / 1000
    assert parse_quantity(format_quantity(amount)) == amount
