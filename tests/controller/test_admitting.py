"""Admissions in flight: counted as admitted until written, never written twice, and kept
while a failed write's outcome is unknown."""

from __future__ import annotations

import asyncio
from typing import cast

from admitter.controller.admitting import Admitting, NotWritten
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.informer import Informer, Key
from admitter.kube.objects import Obj


def _workload(version: str, admitted: bool = False) -> Obj:
    status = {"admission": {"clusterQueue": "q"}} if admitted else {}
    return {"metadata": {"namespace": "ns", "name": "w", "resourceVersion": version},
            "status": status}


def _cache(*objects: Obj) -> Informer:
    informer = Informer(cast(Kube, None), kube.WORKLOADS, lambda *_: None)
    for obj in objects:
        informer.observe(obj)
    return informer


async def test_an_admission_is_overlaid_until_written_and_never_started_twice() -> None:
    admitting = Admitting()
    release = asyncio.Event()
    written: list[str] = []

    async def write(label: str) -> None:
        await release.wait()
        written.append(label)

    workload = _workload("1+admitting", admitted=True)
    admitting.start(workload, "1", write("first"))
    admitting.start(workload, "1", write("second"))
    assert admitting.busy("ns", "w") and admitting.overlay[("ns", "w")] is workload
    release.set()
    await admitting.drain()
    assert written == ["first"]
    assert not admitting.busy("ns", "w") and not admitting.overlay


async def test_an_admission_dropped_before_its_write_drops_the_overlay() -> None:
    admitting = Admitting()

    async def closed() -> None:
        raise NotWritten("its queue is being deleted")

    admitting.start(_workload("1+admitting", admitted=True), "1", closed())
    await admitting.wait("ns", "w")
    assert not admitting.overlay and not admitting.unsettled


async def test_a_write_of_unknown_outcome_keeps_its_room_until_the_cache_shows_it() -> None:
    admitting = Admitting()

    async def lost() -> None:
        raise TimeoutError("the answer was lost")

    async def unreachable(key: Key, decided_on: str) -> Obj | None:
        raise ConnectionResetError

    admitting.start(_workload("1+admitting", admitted=True), "1", lost())
    await admitting.wait("ns", "w")
    assert ("ns", "w") in admitting.overlay, "the write may have landed"
    stale = _cache(_workload("1"))
    admitting.settle(stale, unreachable)
    await asyncio.sleep(0)
    assert ("ns", "w") in admitting.overlay, "neither the cache nor the API told"
    admitting.settle(_cache(_workload("2", admitted=True)), unreachable)
    assert not admitting.overlay and not admitting.unsettled


async def test_settling_reads_the_truth_and_records_it() -> None:
    admitting = Admitting()
    read: list[str] = []

    async def lost() -> None:
        raise TimeoutError("the answer was lost")

    async def voided(key: Key, decided_on: str) -> Obj | None:
        read.append(decided_on)
        return _workload("3")

    admitting.start(_workload("1+admitting", admitted=True), "1", lost())
    await admitting.wait("ns", "w")
    cache = _cache(_workload("1"))
    admitting.settle(cache, voided)
    admitting.settle(cache, voided)  # one read at a time
    for _ in range(3):
        await asyncio.sleep(0)
    assert read == ["1"]
    assert not admitting.overlay and not admitting.unsettled
    got = cache.get("ns", "w")
    assert got is not None and got["metadata"]["resourceVersion"] == "3"
