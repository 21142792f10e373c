"""Leader election on a Lease: only the leader reconciles; followers keep caches warm so a
hand-over is fast.

The semantics are client-go's: a replica may take the Lease once its holder has not renewed
it for `lease_duration` seconds, as observed on the replica's own clock. Two hazards shaped
this module:
- an API server that goes away (restarted, stopped, its path cut) must not end any replica,
  leader or follower: every failure to read or write the Lease is retried, forever;
- a leader that cannot renew must stop acting before anyone else can take over. Its
  leadership is proven until `renew_deadline` (< `lease_duration`) after the start of its
  last successful renewal; every attempt is cut off at that moment, the work is cancelled
  then, and `leading()` (the fence every controller write asks) turns False at once.
A replica that lost the Lease goes back to following and may lead again later.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from fractions import Fraction

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj

log = logging.getLogger(__name__)
LEASE_ERRORS: tuple[type[BaseException], ...] = (ApiException, *kube.CONNECTION_ERRORS)
"""What a Lease read or write may fail with and be tried again at the next renewal: an answer
from the API server (a conflict with another replica) or no answer at all."""
LEASE_SECONDS = 15
"""How long a Lease holds without renewal, by default: kube-controller-manager's and
kube-scheduler's default (`--leader-elect-lease-duration`), so a leader that dies has a
successor within 15 s, while an API server that pauses for a few seconds deposes no one."""
RENEW_SHARE = Fraction(2, 3)
"""`renew_deadline` as a part of the lease: Kubernetes' defaults renew within 10 s of a 15 s
lease. The third left is the margin between the moment a leader that cannot renew stops
acting and the earliest moment another replica may take over: a request in flight, and clocks
that run at slightly different rates."""
RETRY_SHARE = Fraction(1, 7)
"""`retry_period` as a part of the lease: Kubernetes' defaults try every 2 s of a 15 s lease
(15/7 is 2.1 s), so a leader has four tries to renew before its deadline and one lost
request does not cost it the Lease, while a follower reads the Lease about every 2 s."""
LEAST_RETRY_PERIOD = 1.0
"""Seconds between tries however short the lease: a lease of a few seconds
(`--lease-duration 3`) still leaves the API server a second between a replica's reads."""


def _micro_time(seconds: float) -> str:
    """A Lease's MicroTime."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Elector:
    def __init__(self, client: Kube, namespace: str, name: str, identity: str,
                 lease_seconds: int = LEASE_SECONDS, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.kube = client
        self.namespace, self.name, self.identity = namespace, name, identity
        # Whole seconds: the Lease object stores leaseDurationSeconds as an integer.
        self.lease_duration = lease_seconds
        self.renew_deadline = float(lease_seconds * RENEW_SHARE)
        self.retry_period = max(LEAST_RETRY_PERIOD, float(lease_seconds * RETRY_SHARE))
        self.clock, self.wall = clock, wall
        self.proven_until = -math.inf
        """Until when (on `clock`) this replica is certainly the leader."""
        self._observed: tuple[str | None, str | None] | None = None
        """The holder and renewTime last read, and when they were first seen (`_seen_at`):
        another holder's Lease expires `lease_duration` after we saw it last change."""
        self._seen_at = -math.inf
        self.term = 0
        """The Lease's leaseTransitions while this replica holds it: with the identity, the
        fencing token of its writes (`fencing_token`)."""

    def leading(self) -> bool:
        return self.clock() < self.proven_until

    def fencing_token(self) -> Obj:
        """What an admission written now records as its leader's term. The API server
        refuses an admission whose token is not the Lease's current one (the policy in
        deploy/leader-fence.yaml): the one write the fence cannot stop, a request already
        past `leading()` when the process stalled, and sent after another replica took over."""
        return {"lease": f"{self.namespace}/{self.name}", "holder": self.identity,
                "term": self.term}

    async def run(self, work: Callable[[], Awaitable[None]]) -> None:
        """Forever: follow until the Lease is ours, run `work` while it stays ours."""
        while True:
            await self._acquire()
            log.info("%s became the leader", self.identity)
            working = asyncio.ensure_future(work())
            try:
                await self._renew_until_lost(working)
            finally:
                working.cancel()
                await asyncio.gather(working, return_exceptions=True)
            log.warning("%s lost the lease %s/%s; following again", self.identity,
                        self.namespace, self.name)

    async def _acquire(self) -> None:
        while not await self.try_acquire_or_renew(timeout=self.renew_deadline):
            await asyncio.sleep(self.retry_period)

    async def _renew_until_lost(self, working: asyncio.Future[None]) -> None:
        while True:
            remaining = self.proven_until - self.clock()
            if remaining <= 0:
                return
            done, _ = await asyncio.wait({working}, timeout=min(self.retry_period, remaining))
            if done:
                working.result()  # work never returns while leading; raise what ended it
                raise RuntimeError("the leader's work ended")
            remaining = self.proven_until - self.clock()
            if remaining > 0:
                await self.try_acquire_or_renew(timeout=remaining)

    async def try_acquire_or_renew(self, timeout: float) -> bool:
        """One attempt, cut off after `timeout` seconds; True if the Lease is ours now (and
        `proven_until` moved on). Failures to reach the API server are logged, not raised."""
        started = self.clock()
        try:
            async with asyncio.timeout(timeout):
                ours = await self._attempt()
        except LEASE_ERRORS as error:
            log.warning("lease %s/%s not renewed by %s: %r", self.namespace, self.name,
                        self.identity, error)
            return False
        if ours:
            self.proven_until = max(self.proven_until, started + self.renew_deadline)
        return ours

    async def _attempt(self) -> bool:
        now = self.wall()
        try:
            lease = await self.kube.get(kube.LEASES, self.name, self.namespace)
        except ApiException as error:
            if not kube.is_not_found(error):
                raise
            await self.kube.create(kube.LEASES, {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, _micro_time(now), 0)})
            self.term = 0
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        observed = (holder, spec.get("renewTime"))
        if observed != self._observed:
            self._observed, self._seen_at = observed, self.clock()
        if holder and holder != self.identity:
            duration = int(spec.get("leaseDurationSeconds") or self.lease_duration)
            if self.clock() < self._seen_at + duration:
                return False  # held by another, and renewed recently enough
        transitions = int(spec.get("leaseTransitions") or 0)
        ours = holder == self.identity
        acquired = spec.get("acquireTime") if ours else None
        # A PUT with the resourceVersion read: if another replica wrote the Lease meanwhile,
        # this conflicts (409) instead of both believing they hold it.
        term = transitions if ours else transitions + 1
        await self.kube.replace(kube.LEASES, {
            **lease, "spec": self._spec(now, acquired or _micro_time(now), term)})
        self.term = term
        return True

    def _spec(self, now: float, acquired: str, transitions: int) -> Obj:
        return {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_duration,
                "acquireTime": acquired, "renewTime": _micro_time(now),
                "leaseTransitions": transitions}
