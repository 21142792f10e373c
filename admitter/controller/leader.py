"""Leader election on a Lease: only the leader reconciles; followers keep caches warm so a
hand-over is fast. Losing the lease ends the process, the safe default (the Deployment
restarts it as a follower), as controller-runtime does."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from kubernetes_asyncio import client
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

log = logging.getLogger(__name__)


class LostLeadership(RuntimeError):
    """The lease could not be renewed in time; stop writing at once."""


async def lead(api: client.ApiClient, namespace: str, name: str, identity: str,
               work: Callable[[], Awaitable[None]], lease_seconds: int = 15) -> None:
    """Wait to become leader, run `work` while leading; raise LostLeadership when lost."""

    async def started() -> None:
        log.info("%s became the leader", identity)
        await work()

    async def stopped() -> None:
        raise LostLeadership(f"{identity} lost the lease {namespace}/{name}")

    config = electionconfig.Config(
        LeaseLock(name, namespace, identity, api),
        # Whole seconds: the Lease object stores leaseDurationSeconds as an integer.
        lease_duration=lease_seconds,
        renew_deadline=lease_seconds * 2 // 3,
        retry_period=max(1, lease_seconds // 7),
        onstarted_leading=started,
        onstopped_leading=stopped,
    )
    await leaderelection.LeaderElection(config).run()
