"""Admissions in flight: counted as admitted until written, never written twice."""

from __future__ import annotations

import asyncio

from admitter.controller.admitting import Admitting


async def test_an_admission_is_overlaid_until_written_and_never_started_twice() -> None:
    admitting = Admitting()
    release = asyncio.Event()
    written: list[str] = []

    async def write(label: str) -> None:
        await release.wait()
        written.append(label)

    workload = {"metadata": {"namespace": "ns", "name": "w"}, "status": {"admission": {}}}
    admitting.start(workload, write("first"))
    admitting.start(workload, write("second"))
    assert admitting.busy("ns", "w") and admitting.overlay[("ns", "w")] is workload
    release.set()
    await admitting.drain()
    assert written == ["first"]
    assert not admitting.busy("ns", "w") and not admitting.overlay


async def test_a_failed_write_drops_the_overlay() -> None:
    admitting = Admitting()

    async def fail() -> None:
        raise RuntimeError("conflict")

    admitting.start({"metadata": {"namespace": "ns", "name": "w"}}, fail())
    await admitting.wait("ns", "w")
    assert not admitting.overlay, "the next pass decides on the API state"
