"""Windowed, decayed GPU time and its normalisation into fair-share usage."""

from __future__ import annotations

import math

import pytest

from admitter.core.model import FairShareSettings, UsageRecord
from admitter.core.usage import normalised_usage, spread_history, windowed_usage

from builders.core import queue, tree

HOUR, DAY = 3600.0, 86400.0
WEEK = FairShareSettings()
HALF_LIFE_1H = FairShareSettings(window=7 * DAY, half_life=HOUR)
OFF = FairShareSettings(window=0.0)


def record(queue: str, start_h: float, end_h: float, gpus: float = 1.0) -> UsageRecord:
    return UsageRecord(queue=queue, start=start_h * HOUR, end=end_h * HOUR, gpus=gpus)


@pytest.mark.parametrize(
    ("records", "expected_gpu_hours"),
    [
        ([record("a", -3, 0, gpus=2)], 6.0),
        ([record("a", -3, -1), record("a", -2, 0, gpus=4)], 10.0),
        # the window is the last 168 h: a record straddling its start is cut there
        ([record("a", -240, -144, gpus=2)], 48.0),
        ([record("a", -400, -200)], 0.0),
        # time is an argument: nothing after `now` is charged yet
        ([record("a", -1, 5)], 1.0),
        ([record("a", 1, 5)], 0.0),
    ],
)
def test_window_clips_records(records: list[UsageRecord], expected_gpu_hours: float) -> None:
    raw = windowed_usage(records, 0.0, WEEK)
    assert raw.get("a", 0.0) == pytest.approx(expected_gpu_hours * HOUR)


def test_half_life_decay_integrates_exactly() -> None:
    last_hour = windowed_usage([record("a", -1, 0)], 0.0, HALF_LIFE_1H)["a"]
    hour_before = windowed_usage([record("a", -2, -1)], 0.0, HALF_LIFE_1H)["a"]
    # ∫₀¹ 0.5^t dt hours = 0.5 / ln 2 hours; an hour older weighs half as much
    assert last_hour == pytest.approx(0.5 / math.log(2) * HOUR)
    assert hour_before == pytest.approx(last_hour / 2)
    steps = 10_000
    midpoints = sum(0.5 ** ((i + 0.5) / steps) for i in range(steps)) / steps * HOUR
    assert last_hour == pytest.approx(midpoints, rel=1e-6)


def test_decay_and_window_combine() -> None:
    settings = FairShareSettings(window=2 * HOUR, half_life=HOUR)
    clipped = windowed_usage([record("a", -5, 0)], 0.0, settings)["a"]
    assert clipped == pytest.approx(0.75 / math.log(2) * HOUR)


def test_with_a_tree_parents_hold_their_subtree() -> None:
    queues = tree(queue("p"), queue("c1", parent="p"), queue("c2", parent="p"), queue("lone"))
    raw = windowed_usage([record("c1", -2, 0), record("c2", -1, 0, gpus=3)], 0.0, WEEK, queues)
    assert raw == pytest.approx({"p": 5 * HOUR, "c1": 2 * HOUR, "c2": 3 * HOUR, "lone": 0.0})


def test_history_is_spread_evenly_over_the_window_ending_now() -> None:
    records = spread_history({"a": 1344.0, "idle": 0.0}, 0.0, WEEK)
    assert records == [UsageRecord("a", start=-7 * DAY, end=0.0, gpus=8.0)]
    assert windowed_usage(records, 0.0, WEEK)["a"] == pytest.approx(1344 * HOUR)
    # three and a half days later, half the lump has slid out of the window
    assert windowed_usage(records, 3.5 * DAY, WEEK)["a"] == pytest.approx(672 * HOUR)


def test_window_zero_turns_everything_off() -> None:
    queues = tree(queue("a"), queue("b"))
    assert spread_history({"a": 10.0}, 0.0, OFF) == []
    assert windowed_usage([record("a", -1, 0)], 0.0, OFF, queues) == {}
    assert normalised_usage(queues, {"a": 3600.0}, 8, OFF) == {"a": 0.0, "b": 0.0}


def test_roots_normalise_by_the_clusters_gpu_time() -> None:
    queues = tree(queue("a"), queue("b"))
    ten_hours = FairShareSettings(window=10 * HOUR)
    usage = normalised_usage(queues, {"a": 24 * HOUR}, 10, ten_hours)
    assert usage == pytest.approx({"a": 0.24, "b": 0.0})  # the KAI deep dive's example


def test_children_normalise_by_their_parent_so_siblings_add_up_to_one() -> None:
    queues = tree(queue("p"), queue("c1", parent="p"), queue("c2", parent="p"), queue("q"),
                  queue("d1", parent="q"))
    raw = {"c1": 3 * HOUR, "c2": 1 * HOUR, "p": 999.0}  # parent entries are ignored
    usage = normalised_usage(queues, raw, 4, FairShareSettings(window=2 * HOUR))
    assert usage == pytest.approx({"p": 0.5, "c1": 0.75, "c2": 0.25, "q": 0.0, "d1": 0.0})


def test_no_gpus_means_no_root_usage() -> None:
    queues = tree(queue("a"))
    assert normalised_usage(queues, {"a": HOUR}, 0, WEEK) == {"a": 0.0}
