"""The cycle runs on a frozen heap and leaves it thawed: whatever it returns or raises, however
cycles overlap; garbage is collected, the heap's after the cycle, the cycle's own during it; a
heap another part of the process froze stays frozen."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
from fake_api import CLOCK, FakeApi, submitted_jobs

from admitter.api.settings import Settings
from admitter.controller.frozen_heap import decide_frozen, one_at_a_time
from admitter.controller.reconciler import Reconciler
from admitter.core.cycle import run_cycle
from admitter.core.decisions import CycleResult, Snapshot


class Cyclic:
    """An object only the cyclic collector can free (it refers to itself)."""

    def __init__(self) -> None:
        self.me = self


def test_the_heap_is_frozen_during_the_cycle_and_thawed_after() -> None:
    assert gc.get_freeze_count() == 0
    during = decide_frozen(lambda _: gc.get_freeze_count(), None)
    assert during > 0
    assert gc.get_freeze_count() == 0


def test_garbage_the_cycle_drops_from_the_frozen_heap_is_collected_after_it() -> None:
    held = [Cyclic()]
    gone = weakref.ref(held[0])

    def drop(_: None) -> bool:
        held.clear()
        gc.collect()
        return gone() is not None

    assert decide_frozen(drop, None), "frozen: no pass frees it during the cycle"
    gc.collect()
    assert gone() is None


def test_the_cycles_own_garbage_is_collected_during_it() -> None:
    def make_garbage(_: None) -> bool:
        gone = weakref.ref(Cyclic())
        gc.collect()
        return gone() is None

    assert decide_frozen(make_garbage, None)


def test_a_cycle_that_raises_still_thaws_the_heap() -> None:
    def fail(_: None) -> None:
        raise ValueError("no decision")

    with pytest.raises(ValueError, match="no decision"):
        decide_frozen(fail, None)
    assert gc.get_freeze_count() == 0


def test_a_heap_frozen_elsewhere_stays_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert decide_frozen(lambda _: gc.get_freeze_count(), None) == frozen
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_overlapping_cycles_keep_the_heap_frozen_until_the_last_ends() -> None:
    inside, release = threading.Event(), threading.Event()

    def waiting(_: None) -> None:
        inside.set()
        release.wait()

    first = threading.Thread(target=decide_frozen, args=(waiting, None))
    first.start()
    try:
        assert inside.wait(timeout=60)
        decide_frozen(lambda _: None, None)
        assert gc.get_freeze_count() > 0, "the first cycle still runs"
    finally:
        release.set()
        first.join()
    assert gc.get_freeze_count() == 0


async def test_the_controller_decides_on_a_frozen_heap() -> None:
    api = FakeApi()
    frozen: list[int] = []

    def recording(snapshot: Snapshot) -> CycleResult:
        frozen.append(gc.get_freeze_count())
        return run_cycle(snapshot)

    controller = Reconciler(api, Settings(), "test", lambda: CLOCK,  # type: ignore[arg-type]
                            decide=recording)
    await submitted_jobs(api, controller, 1, gpus=4, n0=8)
    assert frozen and all(count > 0 for count in frozen)
    assert gc.get_freeze_count() == 0


def test_a_kept_core_decides_one_snapshot_at_a_time() -> None:
    """A pass cancelled with its lease leaves its cycle running in its thread; the next pass's
    cycle on the same kept core waits for it instead of syncing the core under it."""
    started, release = threading.Event(), threading.Event()
    inside: list[str] = []
    overlapped: list[bool] = []

    def slow(name: str) -> str:
        overlapped.append(bool(inside))
        inside.append(name)
        if name == "first":
            started.set()
            release.wait(5)
        inside.remove(name)
        return name

    decide = one_at_a_time(slow)
    first = threading.Thread(target=decide, args=("first",))
    first.start()
    assert started.wait(5)
    second = threading.Thread(target=decide, args=("second",))
    second.start()
    second.join(0.2)
    assert second.is_alive(), "the second cycle did not wait for the first"
    release.set()
    first.join()
    second.join()
    assert overlapped == [False, False]
