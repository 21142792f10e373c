"""A parent cycle stored past the webhook (as two concurrent re-parentings leave it) on the real
control plane: the controller holds the queues' admissions, says why in their Active
condition, and admits once a parent changes."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from admitter_world import apply_all, in_process_controller, jobs, running

from admitter.api.workload import CONDITION_ACTIVE, Reason
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, cluster_queue, local_queue

pytestmark = pytest.mark.integration


async def active_reason(api: Kube, name: str) -> str | None:
    queue = await api.get(kube.CLUSTER_QUEUES, name)
    found = [c for c in (queue.get("status") or {}).get("conditions", [])
             if c["type"] == CONDITION_ACTIVE]
    return found[0]["reason"] if found else None


async def reasons(api: Kube, a: str, b: str, reason: Reason) -> bool:
    return {await active_reason(api, a), await active_reason(api, b)} == {reason}


async def test_a_cycle_holds_admissions_with_a_condition_until_a_parent_changes(
        api: Kube, namespace: str, kubeconfig: Path) -> None:
    tag = secrets.token_hex(3)
    a, b = f"cycle-{tag}-a", f"cycle-{tag}-b"
    await apply_all(api, cluster_queue(a, 8, parent=b), cluster_queue(b, 8, parent=a),
                    local_queue(a, namespace=namespace, name="team"))
    await apply_all(api, JobWrapper("train", namespace).queue("team").gpus(1).obj())
    try:
        async with in_process_controller(kubeconfig):
            await eventually(lambda: reasons(api, a, b, Reason.PARENT_CYCLE),
                             "both queues Active=False/ParentCycle")
            assert (await jobs(api, namespace))["train"]["spec"]["suspend"] is True

            await api.patch(kube.CLUSTER_QUEUES, b, {"spec": {"parent": None}})

            async def train_runs() -> bool:
                return running((await jobs(api, namespace))["train"])

            await eventually(train_runs, "the Job admitted once the cycle is broken", timeout=45)
            await eventually(lambda: reasons(api, a, b, Reason.READY), "both queues Active again")
    finally:
        for name in (a, b):
            await api.request("DELETE", kube.CLUSTER_QUEUES.path(name=name), None)
