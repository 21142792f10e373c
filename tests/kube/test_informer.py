"""The informer's list/watch bookkeeping, driven by a scripted stream (a unit test of the
edge's logic; the integration tests run it against the real API server)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.kube.client import NODES, Kind, decode
from admitter.kube.informer import Informer, newer


def node(name: str, version: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(version)}}


class ScriptedApi:
    """Lists return the given snapshots in turn; watches replay scripted events, then 410."""

    def __init__(self, lists: list[list[dict[str, Any]]], events: list[dict[str, Any]]):
        self.lists = lists
        self.events = events
        self.watched_from: list[str] = []

    async def list(self, kind: Kind, query: dict[str, str] | None = None) -> dict[str, Any]:
        items = self.lists.pop(0)
        version = max((int(i["metadata"]["resourceVersion"]) for i in items), default=1)
        return {"kind": "NodeList", "items": items, "metadata": {"resourceVersion": str(version)}}

    async def watch(self, kind: Kind, resource_version: str,
                    query: dict[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        self.watched_from.append(resource_version)
        while self.events:
            yield self.events.pop(0)
        if self.lists:
            raise ApiException(status=410, reason="too old resource version")
        await asyncio.sleep(3600)


async def test_watch_resumes_and_a_410_relists_replacing_the_store() -> None:
    api = ScriptedApi(
        lists=[[node("a", 5), node("b", 6)], [node("b", 9), node("c", 10)]],
        events=[{"type": "MODIFIED", "object": node("a", 7)},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}}],
    )
    changes: list[tuple[str, str]] = []
    def record(kind: str, obj: dict[str, Any]) -> None:
        changes.append((kind, obj["metadata"]["name"]))

    informer = Informer(api, NODES, record)  # type: ignore[arg-type]
    task = asyncio.create_task(informer.run())
    try:
        for _ in range(100):
            if informer.relists == 2:
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert api.watched_from == ["6", "10"], "resumed from the list, then from the re-list"
    assert sorted(informer.store) == [("", "b"), ("", "c")], "a re-list replaces the store"
    assert ("MODIFIED", "a") in changes and ("DELETED", "a") in changes
    assert informer.resource_version == "10"


async def test_a_watch_event_older_than_our_own_write_does_not_replace_it() -> None:
    api = ScriptedApi(lists=[[node("a", 5)]],
                      events=[{"type": "MODIFIED", "object": node("a", 6)}])

    def write_after_the_list(kind: str, _obj: dict[str, Any]) -> None:
        if kind == "SYNC":
            informer.observe(node("a", 7))  # our write's response, ahead of the watch

    informer = Informer(api, NODES, write_after_the_list)  # type: ignore[arg-type]
    task = asyncio.create_task(informer.run())
    try:
        for _ in range(100):
            if informer.resource_version == "6":
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert informer.resource_version == "6", "the watch delivered the older version"
    assert informer.store[("", "a")]["metadata"]["resourceVersion"] == "7"


def _idle() -> Informer:
    return Informer(ScriptedApi([], []), NODES, lambda *_: None)  # type: ignore[arg-type]


def test_a_read_newer_than_the_store_is_kept_over_older_watch_events() -> None:
    informer = _idle()
    informer._apply({"type": "ADDED", "object": node("a", 5)})
    with informer.reading() as touched:
        read = node("a", 7)  # a fresh read; the watch lags behind it
    informer.observe_read(read, touched)
    informer._apply({"type": "MODIFIED", "object": node("a", 6)})
    assert informer.store[("", "a")]["metadata"]["resourceVersion"] == "7"
    informer._apply({"type": "MODIFIED", "object": node("a", 7)})
    informer._apply({"type": "MODIFIED", "object": node("a", 8)})
    assert informer.store[("", "a")]["metadata"]["resourceVersion"] == "8"


async def test_a_read_the_watch_overtook_is_not_recorded() -> None:
    """The watch delivered a newer version while the read was under way: recording the read
    would put the store back, and skip every later event as older than it."""
    informer = Informer(ScriptedApi([[node("a", 5)]], []), NODES,  # type: ignore[arg-type]
                        lambda *_: None)
    await informer._list()
    with informer.reading() as touched:
        read = node("a", 5)
        informer._apply({"type": "MODIFIED", "object": node("a", 6)})
    informer.observe_read(read, touched)
    informer._apply({"type": "MODIFIED", "object": node("a", 7)})
    assert informer.store[("", "a")]["metadata"]["resourceVersion"] == "7"


def test_a_read_newer_than_what_a_lagging_watch_delivers_meanwhile_is_kept() -> None:
    """A replica resumed after a freeze: its watch replays old versions while a new leader
    reads afresh. The read (7) is newer than the version the watch delivers during it (6):
    it is kept, and the watch's older versions are skipped until it catches up."""
    informer = _idle()
    informer._apply({"type": "ADDED", "object": node("a", 5)})
    with informer.reading() as touched:
        read = node("a", 7)
        informer._apply({"type": "MODIFIED", "object": node("a", 6)})
    informer.observe_read(read, touched)
    assert informer.store[("", "a")]["metadata"]["resourceVersion"] == "7"
    informer._apply({"type": "MODIFIED", "object": node("a", 7)})
    informer._apply({"type": "MODIFIED", "object": node("a", 8)})
    assert informer.store[("", "a")]["metadata"]["resourceVersion"] == "8"


async def test_a_relist_keeps_our_writes_that_are_newer_than_the_list() -> None:
    """A write returned while the list was read: the list (at version 6) predates it. The store
    keeps the written versions (an update, a creation) until the watch, resumed from the list,
    delivers them; what the list holds alone replaces the rest."""
    api = ScriptedApi([[node("a", 5), node("b", 6)]], [])
    informer = Informer(api, NODES, lambda *_: None)  # type: ignore[arg-type]
    informer.observe(node("a", 7))
    informer.observe(node("c", 8))
    informer.observe(node("d", 3))
    await informer._list()
    versions = {name: obj["metadata"]["resourceVersion"]
                for (_, name), obj in informer.store.items()}
    assert versions == {"a": "7", "b": "6", "c": "8"}
    informer._apply({"type": "MODIFIED", "object": node("a", 6)})
    assert informer.store[("", "a")]["metadata"]["resourceVersion"] == "7", "older: skipped"
    informer._apply({"type": "MODIFIED", "object": node("a", 7)})
    informer._apply({"type": "MODIFIED", "object": node("a", 9)})
    assert informer.store[("", "a")]["metadata"]["resourceVersion"] == "9"


@pytest.mark.parametrize(("version", "than", "expected"), [
    ("10", "9", True), ("9", "10", False), ("7", "7", False), ("123", "122", True),
    ("010", "9", False), ("abc", "1", False), ("2", "", False), (None, "1", False),
])
def test_resource_versions_compare_as_integers_or_not_at_all(
        version: str | None, than: str, expected: bool) -> None:
    assert newer(version, than) is expected


class UnservedApi:
    """An API server without the kind's CRD: every list answers 404, until `served`."""

    def __init__(self) -> None:
        self.lists = 0
        self.served = False

    async def list(self, kind: Kind, query: dict[str, str] | None = None) -> dict[str, Any]:
        self.lists += 1
        if not self.served:
            raise ApiException(status=404, reason="the server could not find the resource")
        return {"items": [node("w", 3)], "metadata": {"resourceVersion": "3"}}

    async def watch(self, kind: Kind, resource_version: str,
                    query: dict[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        await asyncio.sleep(3600)
        yield {}


async def test_a_kind_whose_crd_is_missing_is_empty_and_synced_told_once_and_found_later(
        monkeypatch: Any, caplog: Any) -> None:
    monkeypatch.setattr("admitter.kube.informer.ABSENT_RETRY", 0.001)
    api = UnservedApi()
    informer = Informer(api, Kind("example.dev/v1", "widgets", True),  # type: ignore[arg-type]
                        lambda event, obj: None, optional=True)
    caplog.set_level("INFO", logger="admitter.kube.informer")
    running = asyncio.create_task(informer.run())
    while api.lists < 5:
        await asyncio.sleep(0.001)
    assert informer.synced.is_set() and informer.items() == []
    assert [r.getMessage() for r in caplog.records] == [
        "widgets: not served by the API server (its CRD is not installed); not queued until "
        "it is"]
    api.served = True
    while not informer.items():
        await asyncio.sleep(0.001)
    running.cancel()
    assert [obj["metadata"]["name"] for obj in informer.items()] == ["w"]
    assert "widgets: served by the API server now" in caplog.records[-1].getMessage()


def applied(name: str, version: int) -> dict[str, Any]:
    """A node as `kubectl apply` leaves it: managedFields and a last-applied copy; and the
    images kubelet says it holds."""
    obj = {"kind": "Node", **node(name, version), "status": {
        "allocatable": {"cpu": "8"},
        "images": [{"names": ["nvcr.io/nvidia/pytorch:24.05-py3"], "sizeBytes": 9e9}]}}
    obj["metadata"].update(
        labels={"pool": "gpu"},
        annotations={"kubectl.kubernetes.io/last-applied-configuration": '{"kind":"Node"}',
                     "team": "vision"},
        managedFields=[{"manager": "kubectl", "operation": "Apply", "fieldsV1": {}}])
    return obj


async def listed_watched_and_written(informer: Informer) -> list[dict[str, Any]]:
    """Objects a, b and c in the store of an informer on a ScriptedApi listing `a` and
    watching `b` come, after the controller wrote `c`."""
    task = asyncio.create_task(informer.run())
    try:
        for _ in range(100):
            if len(informer.store) == 2:
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    informer.observe(applied("c", 7))
    return [informer.store["", name] for name in "abc"]


def applied_api() -> Any:
    return ScriptedApi(lists=[[applied("a", 5)]],
                       events=[{"type": "ADDED", "object": applied("b", 6)}])


async def test_cached_objects_keep_what_admitter_reads_and_drop_managed_fields() -> None:
    """Listed, watched and written objects alike: no managedFields, no last-applied copy, no
    images on a Node; labels, other annotations and the rest of its status kept."""
    informer = Informer(applied_api(), NODES, lambda kind, obj: None)
    for obj in await listed_watched_and_written(informer):
        assert obj["status"] == {"allocatable": {"cpu": "8"}}
        meta = obj["metadata"]
        assert "managedFields" not in meta, meta["name"]
        assert meta["annotations"] == {"team": "vision"}, meta["name"]
        assert meta["labels"] == {"pool": "gpu"}, meta["name"]


async def test_an_informer_keeps_what_its_projection_makes_of_each_object() -> None:
    """Listed, watched and written objects alike are kept as `keep` makes them, after `lean`;
    `on_change` is told of the kept object."""
    told: list[dict[str, Any]] = []
    def keep(obj: dict[str, Any]) -> dict[str, Any]:
        assert "managedFields" not in obj["metadata"]
        return {"metadata": obj["metadata"], "kept": True}

    informer = Informer(applied_api(), NODES, lambda kind, obj: told.append(obj), keep=keep)
    for obj in await listed_watched_and_written(informer):
        assert obj == {"metadata": obj["metadata"], "kept": True}
    assert told and all(obj.get("kept") for obj in told)


def test_the_client_decodes_the_api_servers_json_as_json_does() -> None:
    text = ('{"kind":"Job","metadata":{"name":"é","resourceVersion":"12"},'
            '"spec":{"parallelism":3,"ratio":0.5,"suspend":true,"x":null,"list":[1,"a"]}}')
    assert decode(text.encode()) == json.loads(text)
