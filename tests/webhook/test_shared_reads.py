"""Concurrent webhook reads share one LIST; a denial never rests on a shared read."""

import asyncio
from dataclasses import dataclass, field

from review_fixtures import NAMESPACE, FakeLookup, job, request, standard_lookup

from admitter.api.localqueue import LocalQueue
from admitter.webhook.jobs import JobPolicy, validate_job
from admitter.webhook.lookup import SharedReads

from builders.kube import local_queue

POLICY = JobPolicy(max_min_runtime=8 * 3600.0, controller_usernames=frozenset())


@dataclass
class SlowLookup(FakeLookup):
    """Reads what exists when asked, answers once `answer` is set (as a LIST in flight would);
    `fresh_reads` counts reads that asked to be fresh."""

    answer: asyncio.Event = field(default_factory=asyncio.Event)
    fresh_reads: int = 0

    async def local_queues(self, namespace: str, fresh: bool = False) -> list[LocalQueue]:
        self.fresh_reads += fresh
        found = await super().local_queues(namespace, fresh)
        await self.answer.wait()
        return found


async def test_concurrent_reads_of_one_kind_share_one_request() -> None:
    inner = SlowLookup(standard_lookup().objects)
    shared = SharedReads(inner)
    reads = [asyncio.ensure_future(shared.local_queues("team-a")) for _ in range(32)]
    await asyncio.sleep(0)
    inner.answer.set()
    answers = await asyncio.gather(*reads)
    assert inner.reads == ["LocalQueue"], "one LIST for 32 callers"
    assert all(a == answers[0] for a in answers) and len(answers[0]) == 2
    await shared.local_queues("team-a")
    assert inner.reads == ["LocalQueue", "LocalQueue"], "a later caller reads anew"


async def test_a_queue_missing_from_a_shared_read_is_looked_up_fresh_before_denying() -> None:
    """The LocalQueue was created while a shared read was in flight: that read lacks it, and
    the Job naming it must still be allowed."""
    inner = SlowLookup(standard_lookup().objects)
    shared = SharedReads(inner)
    in_flight = asyncio.ensure_future(shared.local_queues("team-a"))
    for _ in range(3):  # the shared LIST is sent
        await asyncio.sleep(0)
    inner.objects.append(local_queue("team-a", name="new", namespace=NAMESPACE))
    checking = asyncio.ensure_future(
        validate_job(request(job(queue="new", suspend=True)), shared, POLICY))
    for _ in range(3):  # the check joins the LIST in flight
        await asyncio.sleep(0)
    inner.answer.set()
    assert [q.metadata.name for q in await in_flight] == ["default", "shared"]
    verdict = await checking
    assert verdict.allowed, verdict.message
    assert inner.fresh_reads == 1, "checked again with a read of its own"
