"""An admission whose write landed but whose answer was lost (the API server restarted or
stopped mid-request, etcd timed out after committing) must keep its room.

The controller runs in this process on the real control plane, through a client that sends
the first admission for real and then raises the timeout a lost answer raises, and that holds
back the Workload watch from then on, as a watch broken by the same restart lags. The room
that admission took must not go to a Workload of higher priority that the next passes see
waiting; once the truth is read, the admitted Job runs.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from admitter_world import FAST, apply_all, jobs, priority_class, workloads
from fault_world import held_gpus

from admitter.controller.reconciler import Reconciler
from admitter.kube import client as kube
from admitter.kube.client import Kind, Kube
from admitter.kube.objects import Obj
from admitter.testing.in_process import background
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration
QUEUE_GPUS = 8


class LosingAnswers(Kube):
    """The real client, but the first admission's answer is lost after it landed, and the
    Workload watch delivers nothing from then until `watch_open` is set."""

    def __init__(self, api: Any) -> None:
        super().__init__(api)
        self.lost: list[Obj] = []
        self.watch_open = asyncio.Event()
        self.watch_open.set()

    async def patch(self, kind: Kind, name: str, patch: Any, namespace: str | None = None,
                    subresource: str | None = None, content_type: str = kube.MERGE_PATCH) -> Obj:
        admission = (kind is kube.WORKLOADS and subresource == "status" and not self.lost
                     and bool((patch.get("status") or {}).get("admission")))
        if admission:
            self.watch_open.clear()  # before the write: its watch event must not arrive
        landed = await super().patch(kind, name, patch, namespace, subresource, content_type)
        if admission:
            self.lost.append(landed)
            raise TimeoutError("the answer was lost: the API server went away")
        return landed

    async def watch(self, kind: Kind, resource_version: str,
                    query: dict[str, str] | None = None) -> AsyncIterator[Obj]:
        async for event in super().watch(kind, resource_version, query):
            if kind is kube.WORKLOADS:
                await self.watch_open.wait()
            yield event


async def passes(reconciler: Reconciler, count: int) -> None:
    """`count` more passes, woken by hand (the held-back watch wakes none)."""
    target = reconciler.passes + count

    async def ran() -> bool:
        reconciler.wakeup.set()
        return reconciler.passes >= target

    await eventually(ran, f"{count} passes of the controller", timeout=120)


async def test_an_admission_whose_answer_was_lost_keeps_its_room(
        api: Kube, namespace: str, kubeconfig: Path) -> None:
    name = f"lost-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, QUEUE_GPUS, limit=QUEUE_GPUS, namespace=namespace))
    await priority_class(api, "lost-answer-high", 50)
    opened = await Kube.from_kubeconfig(str(kubeconfig))
    client = LosingAnswers(opened.api)
    reconciler = Reconciler(client, FAST, "lost-answer")
    try:
        async with background(reconciler.run_informers(), reconciler.run()):
            await apply_all(api, JobWrapper("first", namespace).gpus(QUEUE_GPUS).obj())

            async def lost() -> bool:
                return bool(client.lost)

            await eventually(lost, "the first admission to land with its answer lost", 60)
            await apply_all(api, JobWrapper("urgent", namespace).gpus(QUEUE_GPUS)
                            .priority_class("lost-answer-high").obj())

            async def urgent_queued() -> bool:
                return len(await workloads(api, namespace)) == 2

            await eventually(urgent_queued, "a Workload for the urgent Job", 60)
            await passes(reconciler, 4)
            held = held_gpus(await workloads(api, namespace))
            assert held <= QUEUE_GPUS, f"{held} GPUs admitted on a queue of {QUEUE_GPUS}"

            client.watch_open.set()

            async def first_started() -> bool:
                reconciler.wakeup.set()
                return not (await jobs(api, namespace))["first"]["spec"]["suspend"]

            await eventually(first_started, "the admitted Job to start", 60)
            await passes(reconciler, 2)
            held = held_gpus(await workloads(api, namespace))
            assert held <= QUEUE_GPUS, f"{held} GPUs admitted on a queue of {QUEUE_GPUS}"
    finally:
        await opened.close()
