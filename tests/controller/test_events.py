"""Events are rate-limited per object and reason: a pending reason flipping back and forth
as the cluster churns is told once per REPEAT_AFTER, a decision every time."""

from __future__ import annotations

import asyncio

from fake_api import FakeApi

from admitter.core.decisions import PendingReason
from admitter.kube.events import REPEAT_AFTER, EventRecorder

from builders.kube import JobWrapper

NO_FIT, QUOTA_EXCEEDED = PendingReason.NO_FIT, PendingReason.QUOTA_EXCEEDED


async def recorded(per_reason: bool) -> list[tuple[str, str]]:
    api = FakeApi()
    recorder = EventRecorder(api, "test")  # type: ignore[arg-type]
    target = JobWrapper("train", "ns").gpus(1).min_runtime(None).uid("uid-train").obj()
    for at, reason, message in ((0, NO_FIT, "8 GPUs free"), (10, QUOTA_EXCEEDED, "at 8"),
                                (20, NO_FIT, "4 GPUs free"),
                                (20 + REPEAT_AFTER, NO_FIT, "2 GPUs free")):
        recorder.record(target, "Job", "Normal", reason, message, at, REPEAT_AFTER, per_reason)
    await asyncio.gather(*recorder.sending)
    return [(e["reason"], e["message"]) for e in api.events()]


async def test_a_reason_that_comes_back_is_not_told_again_within_repeat_after() -> None:
    assert await recorded(per_reason=True) == [
        (NO_FIT, "8 GPUs free"), (QUOTA_EXCEEDED, "at 8"), (NO_FIT, "2 GPUs free")]


async def test_by_default_a_new_message_is_a_new_event() -> None:
    assert len(await recorded(per_reason=False)) == 4
