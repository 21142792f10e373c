"""A deposed leader's last admission must not land.

The fence (`Elector.leading`) is asked before a request waits for its connection. A leader
frozen (SIGSTOP, a stalled node) right after that check sends the request when it continues,
after its Lease expired and another replica took over, counted the GPUs and admitted other
work into them: the fault soak saw 66 GPUs admitted on 64 that way. Here the old leader's
admission is held at exactly that point, past its fence, while the other replica takes the
Lease; then it is sent. The API server must refuse it (deploy/leader-fence.yaml), and the new
leader's own admission of the same Workload must land.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from fault_world import leader_fence
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.controller import kube
from admitter.controller.actions import Actions, admission_status
from admitter.controller.kube import Kube, Obj
from admitter.controller.leader import Elector
from admitter.core.decisions import Admission
from admitter.testing.waiting import eventually

from builders.kube import workload

pytestmark = pytest.mark.integration
LEASE = "fenced"
LEASE_SECONDS = 2


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


def admission_of(wl: Obj, elector: Elector) -> dict[str, Any]:
    decision = Admission(key=f"{wl['metadata']['namespace']}/{wl['metadata']['name']}",
                         queue="team", pod_set_nodes=({"node-0": 1},), affinity={},
                         message=f"admitted by {elector.identity}")
    return admission_status(wl, decision, time.time(), elector.fencing_token())


async def test_an_admission_sent_after_the_lease_changed_hands_is_refused(
        api: Kube, namespace: str) -> None:
    await api.create(kube.WORKLOADS, {**workload("train", gpus=8),
                                      "metadata": {"name": "train", "namespace": namespace}})
    wl = await api.get(kube.WORKLOADS, "train", namespace)
    old = Elector(api, namespace, LEASE, "replica-old", LEASE_SECONDS)
    new = Elector(api, namespace, LEASE, "replica-new", LEASE_SECONDS)
    async with leader_fence(api, namespace, LEASE):
        assert await old.try_acquire_or_renew(timeout=10)
        stalled = StalledPastTheFence(api.api, old.leading)
        late = asyncio.create_task(
            Actions(stalled).patch_workload_status(wl, admission_of(wl, old)))
        await asyncio.wait_for(stalled.stalled.wait(), timeout=10)

        async def taken_over() -> bool:
            return await new.try_acquire_or_renew(timeout=10)

        await eventually(taken_over, "the other replica to take the expired Lease")
        assert new.term == old.term + 1
        stalled.resume.set()
        with pytest.raises(ApiException) as refused:
            await late
        assert refused.value.status == 403
        assert "replica-old in term 0" in str(refused.value.reason)
        assert "replica-new holds now in term 1" in str(refused.value.reason)
        assert not (await api.get(kube.WORKLOADS, "train", namespace)).get(
            "status", {}).get("admission")

        async def admitted_by_the_new_leader() -> Obj | None:
            try:  # the API server may read the new Lease a moment after it was written
                return await Actions(api.fenced(new.leading)).patch_workload_status(
                    wl, admission_of(wl, new))
            except ApiException as error:
                if error.status != 403:
                    raise
                return None

        admitted = await eventually(admitted_by_the_new_leader, "the new leader's admission")
        assert admitted["status"]["admission"]["admittedBy"] == {
            "lease": f"{namespace}/{LEASE}", "holder": "replica-new", "term": 1}
