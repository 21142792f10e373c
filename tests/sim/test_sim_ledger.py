"""The usage ledger hands the core records worth exactly the GPU time of every run reaching
into the window, however many it folds together."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from admitter.core.model import FairShareSettings, UsageRecord
from admitter.core.usage import HOUR, windowed_usage
from admitter.sim.ledger import UsageLedger

DAY = 24 * HOUR
HISTORY = {"a": 100.0, "b": 10.0}

runs = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 20 * DAY),
              st.integers(1, 3 * DAY), st.integers(1, 16)),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(runs, st.sampled_from([0.0, 6 * HOUR]), st.sampled_from([DAY, 7 * DAY]))
def test_records_integrate_to_the_usage_of_every_run(
    drawn: list[tuple[str, int, int, int]], half_life: float, window: float
) -> None:
    fair_share = FairShareSettings(window=window, half_life=half_life)
    ledger = UsageLedger(fair_share, HISTORY)
    every: list[UsageRecord] = []
    moments = sorted({start for _, start, _, _ in drawn} | {start + length for _, start, length, _
                                                               in drawn} | {25 * DAY})
    opened = {i: run for i, run in enumerate(drawn)}
    for now in moments:
        for i, (queue, start, length, gpus) in opened.items():
            if start + length == now:
                ledger.close(str(i), now)
                every.append(UsageRecord(queue, start, now, gpus))
        for i, (queue, start, _, gpus) in opened.items():
            if start == now:
                ledger.open(str(i), queue, now, gpus)
        running = [UsageRecord(q, s, now, g) for q, s, length, g in drawn if s <= now < s + length]
        history = [UsageRecord(q, -window, 0.0, hours * HOUR / window)
                   for q, hours in HISTORY.items()]
        expected = windowed_usage([*history, *every, *running], now, fair_share)
        handed = windowed_usage(ledger.records(now), now, fair_share)
        for queue in {*expected, *handed}:
            assert handed.get(queue, 0.0) == pytest.approx(expected.get(queue, 0.0), rel=1e-9,
                                                           abs=1e-6)


def test_without_decay_a_month_of_runs_reaches_the_core_as_few_records() -> None:
    ledger = UsageLedger(FairShareSettings(), {})
    for i in range(30 * 24 * 6):
        ledger.open(str(i), f"q{i % 3}", i * 600.0, 8)
        ledger.close(str(i), i * 600.0 + 1200.0)
    records = ledger.records(30 * DAY)
    # A week of runs reaches the core as one record per queue.
    assert sorted(record.queue for record in records) == ["q0", "q1", "q2"]
