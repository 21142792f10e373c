"""The usage ledger: funded GPU time charged by the hour, read off the window with decay;
and its normalisation into fair-share usage."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from admitter.core.model import FairShareSettings
from admitter.core.usage import HOUR, UsageLedger, fair_share_now, normalised_usage

from builders.core import queue, tree

DAY = 86400.0
WEEK = FairShareSettings()
HALF_LIFE_1H = FairShareSettings(window=7 * DAY, half_life=HOUR)
OFF = FairShareSettings(window=0.0)


def ledger_of(runs: list[tuple[str, float, float, float]],
              fair_share: FairShareSettings = WEEK, now: float = math.inf) -> UsageLedger:
    """Runs (queue, start hour, end hour, GPUs), fed in time order as the callers do, up to
    `now`: a run that ends later is going on."""
    ledger = UsageLedger(fair_share)
    events = [(start, 1, i) for i, (_, start, _, _) in enumerate(runs)]
    events += [(end, 0, i) for i, (_, _, end, _) in enumerate(runs)]
    for at, opens, i in sorted(events):
        if at * HOUR > now:
            break
        queue_name, _, _, gpus = runs[i]
        if opens:
            ledger.open(str(i), queue_name, at * HOUR, gpus)
        else:
            ledger.close(str(i), at * HOUR)
    return ledger


@pytest.mark.parametrize(
    ("runs", "now_h", "expected_gpu_hours"),
    [
        ([("a", -3, 0, 2)], 0, 6.0),
        ([("a", -3, -1, 1), ("a", -2, 0, 4)], 0, 10.0),
        # the window is the last 168 h: a run straddling its start is cut there
        ([("a", -240, -144, 2)], 0, 48.0),
        ([("a", -400, -200, 1)], 0, 0.0),
        # time is an argument: a run going on is charged up to now
        ([("a", -1, 5, 1)], 0, 1.0),
    ],
)
def test_window_clips_runs(runs: list[tuple[str, float, float, float]], now_h: float,
                           expected_gpu_hours: float) -> None:
    ledger = ledger_of(runs, now=now_h * HOUR)
    used = ledger.usage(now_h * HOUR)
    assert used.get("a", 0.0) == pytest.approx(expected_gpu_hours * HOUR)


def test_the_hour_the_window_start_cuts_counts_as_if_used_evenly() -> None:
    """The rule of the hourly form: 2 GPUs in the first quarter of an hour that the window's
    start cuts in half count as half the hour's GPU-seconds, wherever in it they were used."""
    ledger = ledger_of([("a", 0, 0.25, 2), ("b", 0.75, 1, 2)])
    now = 0.5 * HOUR + WEEK.window
    assert ledger.usage(now) == pytest.approx({"a": 900.0, "b": 900.0})
    assert ledger.usage(HOUR + WEEK.window) == {}
    assert ledger.hours("a") == (HOUR + WEEK.window, {})  # the hour left the window


def test_half_life_decay_integrates_exactly() -> None:
    last_hour = ledger_of([("a", -1, 0, 1)], HALF_LIFE_1H).usage(0.0)["a"]
    hour_before = ledger_of([("a", -2, -1, 1)], HALF_LIFE_1H).usage(0.0)["a"]
    # ∫₀¹ 0.5^t dt hours = 0.5 / ln 2 hours; an hour older weighs half as much
    assert last_hour == pytest.approx(0.5 / math.log(2) * HOUR)
    assert hour_before == pytest.approx(last_hour / 2)
    steps = 10_000
    midpoints = sum(0.5 ** ((i + 0.5) / steps) for i in range(steps)) / steps * HOUR
    assert last_hour == pytest.approx(midpoints, rel=1e-6)


def test_decay_and_window_combine() -> None:
    settings = FairShareSettings(window=2 * HOUR, half_life=HOUR)
    clipped = ledger_of([("a", -5, 0, 1)], settings).usage(0.0)["a"]
    assert clipped == pytest.approx(0.75 / math.log(2) * HOUR)


def test_parents_hold_their_subtree_in_the_cycles_figures() -> None:
    queues = tree(queue("p"), queue("c1", parent="p"), queue("c2", parent="p"), queue("lone"))
    used = ledger_of([("c1", -2, 0, 1), ("c2", -1, 0, 3)]).usage(0.0)
    raw, _, _ = fair_share_now(queues, {"nvidia.com/gpu": 8}, {}, used, WEEK)
    assert raw == pytest.approx({"p": 5 * HOUR, "c1": 2 * HOUR, "c2": 3 * HOUR, "lone": 0.0})


def test_history_is_spread_evenly_over_the_window_ending_now() -> None:
    ledger = UsageLedger(WEEK)
    ledger.add_history({"a": 1344.0, "idle": 0.0}, 0.0)
    assert ledger.usage(0.0) == pytest.approx({"a": 1344 * HOUR})
    # three and a half days later, half the lump has slid out of the window
    assert ledger.usage(3.5 * DAY) == pytest.approx({"a": 672 * HOUR})


def test_window_zero_turns_everything_off() -> None:
    queues = tree(queue("a"), queue("b"))
    ledger = ledger_of([("a", -1, 0, 1)], OFF)
    ledger.add_history({"a": 10.0}, 0.0)
    assert ledger.usage(0.0) == {} and ledger.hours("a") is None
    assert normalised_usage(queues, {"a": 3600.0}, 8, OFF) == {"a": 0.0, "b": 0.0}


def test_restored_hours_charge_a_run_only_from_when_they_end() -> None:
    """A run known from before the restore is in the restored hours already."""
    ledger = UsageLedger(WEEK)
    ledger.restore("a", {0: 4 * HOUR}, accounted=HOUR)
    ledger.open("w", "a", at=0.0, gpus=4)
    assert ledger.usage(2 * HOUR) == pytest.approx({"a": 8 * HOUR})


def test_short_gpus_average_short_runs_over_the_part_of_the_window_seen() -> None:
    """4 short GPUs for an hour, seen for two: 2 on average. Long runs do not count; once the
    window has been seen whole, the average is over the whole window."""
    ledger = UsageLedger(FairShareSettings(window=10 * HOUR))
    ledger.open("debug", "a", at=0.0, gpus=4, short=True)
    ledger.open("train", "a", at=0.0, gpus=8)
    ledger.close("debug", HOUR)
    assert ledger.short_gpus(2 * HOUR) == pytest.approx(2.0)
    assert ledger.short_gpus(10 * HOUR) == pytest.approx(0.4)
    assert ledger.short_gpus(11 * HOUR) == 0.0  # the hour left the window
    assert UsageLedger(WEEK).short_gpus(HOUR) == 0.0  # no short job seen yet


def test_a_forgotten_queues_short_runs_stop_counting() -> None:
    ledger = UsageLedger(FairShareSettings(window=10 * HOUR))
    ledger.open("debug", "a", at=0.0, gpus=4, short=True)
    assert ledger.short_gpus(HOUR) == pytest.approx(4.0)
    ledger.forget("a")
    assert ledger.short_gpus(2 * HOUR) == pytest.approx(2.0)


RUNS = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 20 * 24), st.integers(1, 72),
                          st.integers(1, 16)), max_size=30)


@settings(max_examples=60, deadline=None)
@given(RUNS, st.integers(0, 30 * 24 * 4), st.sampled_from([DAY, 7 * DAY]))
def test_usage_is_the_runs_gpu_time_but_for_the_hour_the_window_start_cuts(
        runs: list[tuple[str, int, int, int]], quarter: int, window: float) -> None:
    """Undecayed, the ledger counts every run's GPU-seconds inside the window exactly, except
    in the hour the window's start cuts, where it counts that hour's share evenly: off by at
    most what the queue used in that hour, and exact when the start is on the hour."""
    fair_share = FairShareSettings(window=window)
    in_hours = [(q, start, start + length, gpus) for q, start, length, gpus in runs]
    now = quarter * HOUR / 4
    ledger = ledger_of(in_hours, fair_share, now)
    used = ledger.usage(now)
    oldest = now - window
    edge = math.floor(oldest / HOUR) * HOUR
    for name in "abc":
        exact = in_edge_hour = 0.0
        for q, start, end, gpus in in_hours:
            if q == name:
                exact += gpus * max(0.0, min(end * HOUR, now) - max(start * HOUR, oldest))
                in_edge_hour += gpus * max(0.0, min(end * HOUR, edge + HOUR) - max(start * HOUR,
                                                                                   edge))
        bound = 0.0 if edge == oldest else in_edge_hour
        assert abs(used.get(name, 0.0) - exact) <= bound + 1e-6 * max(exact, 1.0)


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
