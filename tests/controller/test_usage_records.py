"""Usage as the controller hands it to the core: hourly buckets from ClusterQueue status."""

from __future__ import annotations

import pytest

from admitter.controller.snapshot import usage_records
from admitter.controller.status import charge
from admitter.controller.translate import format_time
from admitter.core.model import FairShareSettings
from admitter.core.usage import windowed_usage

HOUR = 3600.0
WEEK = FairShareSettings(window=7 * 24 * HOUR)
T0 = 1_780_000_000.0 // HOUR * HOUR
"""An hour boundary, as the buckets are."""


def queue_status(buckets: list[dict[str, object]], accounted: float) -> dict[str, object]:
    return {"status": {"usage": buckets, "usageAccountedAt": format_time(accounted)}}


@pytest.mark.parametrize("minutes_into_the_hour", [1, 30, 59])
def test_the_hour_being_charged_counts_in_full(minutes_into_the_hour: int) -> None:
    """Two GPUs held since the hour before: every charged GPU-second is in the usage."""
    now = T0 + HOUR + minutes_into_the_hour * 60
    buckets = charge([], 2.0, T0, now, WEEK.window)
    records = usage_records("team-a", queue_status(buckets, now))
    used = windowed_usage(records, now, WEEK)
    assert used["team-a"] == pytest.approx(2.0 * (now - T0))


def test_usage_charged_later_than_it_is_read_is_not_stretched() -> None:
    """Read a minute after the last charge, the usage is what was charged, no more or less."""
    accounted = T0 + 20 * 60
    buckets = charge([], 4.0, T0, accounted, WEEK.window)
    records = usage_records("team-a", queue_status(buckets, accounted))
    assert windowed_usage(records, accounted + 60, WEEK)["team-a"] == pytest.approx(4.0 * 1200)


def test_closed_hours_slide_out_of_the_window() -> None:
    buckets = charge([], 1.0, T0, T0 + 2 * HOUR, WEEK.window)
    records = usage_records("team-a", queue_status(buckets, T0 + 2 * HOUR))
    half_out = T0 + WEEK.window + 1.5 * HOUR
    assert windowed_usage(records, half_out, WEEK)["team-a"] == pytest.approx(0.5 * HOUR)
