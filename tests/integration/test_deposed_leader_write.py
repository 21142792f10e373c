"""A deposed leader's last admission must not land.

The fence (`Elector.leading`) is asked before a request waits for its connection. A leader
frozen (SIGSTOP, a stalled node) right after that check sends the request when it continues,
after its Lease expired and another replica took over, counted the GPUs and admitted other
work into them: the fault soak saw 66 GPUs admitted on 64 that way. Here the old leader's
admission is held at exactly that point, past its fence, while the other replica takes the
Lease; then it is sent. The API server must refuse it (deploy/leader-fence.yaml), and the new
leader's own admission of the same Workload must land.

The API server reads policies, their bindings and the Lease from its own watches, a moment
behind the writes: the test starts once it refuses an admission in a made-up term, and sends
the old leader's write only once an admission of the new leader's has landed (until the API
server has seen the new term it refuses those and would let the old term's through), as a
stalled process sends it seconds later.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from fault_world import leader_fence
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.controller.actions import Actions, admission_status
from admitter.controller.leader import Elector
from admitter.core.decisions import Admission
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj
from admitter.testing.waiting import eventually

from builders.kube import workload

pytestmark = pytest.mark.integration
LEASE = "fenced"
LEASE_SECONDS = 3


class StalledPastTheFence(Kube):
    """The real client, whose admission writes stop after the fence let them through, until
    `resume` is set: a request whose process froze before it reached the wire."""

    def __init__(self, api: Any, fence: Any) -> None:
        super().__init__(api, fence)
        self.stalled = asyncio.Event()
        self.resume = asyncio.Event()

    async def _request(self, method: str, path: str, body: Any, query: dict[str, str] | None,
                       content_type: str) -> Obj:
        if path.endswith("/status") and ((body or {}).get("status") or {}).get("admission"):
            self.stalled.set()
            await self.resume.wait()
        return await super()._request(method, path, body, query, content_type)


def admission_of(wl: Obj, token: Obj) -> dict[str, Any]:
    decision = Admission(key=f"{wl['metadata']['namespace']}/{wl['metadata']['name']}",
                         queue="team", pod_set_nodes=({"node-0": 1},), affinity={},
                         message=f"admitted by {token['holder']}")
    return admission_status(wl, decision, time.time(), token)


async def admitted_by(elector: Elector, wl: Obj) -> Obj | None:
    """`elector`'s admission of `wl` as written, or None while the API server refuses it for
    a term it has not seen yet."""
    try:
        return await Actions(elector.kube.fenced(elector.leading)).patch_workload_status(
            wl, admission_of(wl, elector.fencing_token()))
    except ApiException as error:
        if error.status != 403:
            raise
        return None


async def test_an_admission_sent_after_the_lease_changed_hands_is_refused(
        api: Kube, namespace: str) -> None:
    for name in ("train", "probe", "canary"):
        await api.create(kube.WORKLOADS, {**workload(name, gpus=8),
                                          "metadata": {"name": name, "namespace": namespace}})
    wl, probe = [await api.get(kube.WORKLOADS, name, namespace) for name in ("train", "probe")]
    old = Elector(api, namespace, LEASE, "replica-old", LEASE_SECONDS)
    new = Elector(api, namespace, LEASE, "replica-new", LEASE_SECONDS)
    async with leader_fence(api, namespace, LEASE):
        assert await old.try_acquire_or_renew(timeout=10)

        async def fence_in_force() -> bool:
            canary = await api.get(kube.WORKLOADS, "canary", namespace)
            made_up = {**old.fencing_token(), "holder": "nobody", "term": 99}
            try:
                await Actions(api).patch_workload_status(canary, admission_of(canary, made_up))
            except ApiException as error:
                return error.status == 403
            return False

        await eventually(fence_in_force, "the API server to apply the leader fence")
        assert await old.try_acquire_or_renew(timeout=10)  # proven again, for the write below
        stalled = StalledPastTheFence(api.api, old.leading)
        late = asyncio.create_task(
            Actions(stalled).patch_workload_status(wl, admission_of(wl, old.fencing_token())))
        await asyncio.wait_for(stalled.stalled.wait(), timeout=10)

        async def taken_over() -> bool:
            return await new.try_acquire_or_renew(timeout=10)

        await eventually(taken_over, "the other replica to take the expired Lease")
        assert new.term == old.term + 1
        await eventually(lambda: admitted_by(new, probe), "the new term to be in force")
        stalled.resume.set()
        with pytest.raises(ApiException) as refused:
            await late
        assert refused.value.status == 403
        assert "replica-old in term 0" in str(refused.value.reason)
        assert "replica-new holds now in term 1" in str(refused.value.reason)
        assert not (await api.get(kube.WORKLOADS, "train", namespace)).get(
            "status", {}).get("admission")

        admitted = await admitted_by(new, wl)
        assert admitted is not None
        assert admitted["status"]["admission"]["admittedBy"] == {
            "lease": f"{namespace}/{LEASE}", "holder": "replica-new", "term": 1}
