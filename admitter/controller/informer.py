"""List-then-watch caches of API objects, resumed from the last resourceVersion.

Each informer keeps the current objects of one kind in memory and calls `on_change` after
every event so the reconciler can schedule a cycle. A watch that ends is resumed from the last
resourceVersion seen (bookmarks keep it fresh); a 410 Gone means that version was compacted
away, so the informer lists again and replaces its store, as client-go's reflector does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.controller.kube import Kind, Kube, Obj

log = logging.getLogger(__name__)
Key = tuple[str, str]
"""(namespace or "", name)."""


def key_of(obj: Obj) -> Key:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


@dataclass(frozen=True)
class StoreWatcher:
    """Told of every change to an informer's store, to keep an index beside it: one object
    changed (`old` None: it is new; `new` None: deleted), or the store was replaced by a
    fresh list."""

    changed: Callable[[Obj | None, Obj | None], None]
    replaced: Callable[[Iterable[Obj]], None]


class Informer:
    """The store of one kind, kept current by a background task."""

    def __init__(self, kube: Kube, kind: Kind, on_change: Callable[[str, Obj], None],
                 query: dict[str, str] | None = None) -> None:
        self.kube = kube
        self.kind = kind
        self.query = query or {}
        self.on_change = on_change
        self.store: dict[Key, Obj] = {}
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0
        self.watchers: list[StoreWatcher] = []

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.store.get((namespace, name))

    def items(self) -> list[Obj]:
        return list(self.store.values())

    async def run(self) -> None:
        """List, then watch forever; re-list on 410 Gone, back off on other errors."""
        backoff = 0.5
        while True:
            try:
                if not self.resource_version:
                    await self._list()
                async for event in self.kube.watch(self.kind, self.resource_version,
                                                   self.query):
                    self._apply(event)
                    backoff = 0.5
            except ApiException as error:
                if error.status == 410:
                    log.info("%s: resourceVersion %s expired, re-listing",
                             self.kind.plural, self.resource_version)
                    self.resource_version = ""
                    continue
                log.warning("%s watch failed: %s", self.kind.plural, error)
            except (OSError, TimeoutError, aiohttp.ClientError) as error:
                log.warning("%s watch interrupted: %s", self.kind.plural, error)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)

    async def _list(self) -> None:
        listed = await self.kube.list(self.kind, self.query)
        kind_name = listed.get("kind", "").removesuffix("List")
        fresh = {}
        for item in listed.get("items", []):
            item.setdefault("kind", kind_name)
            fresh[key_of(item)] = item
        gone = [obj for key, obj in self.store.items() if key not in fresh]
        self.store = fresh
        for watcher in self.watchers:
            watcher.replaced(fresh.values())
        self.resource_version = listed["metadata"]["resourceVersion"]
        self.relists += 1
        self.synced.set()
        for obj in gone:
            self.on_change("DELETED", obj)
        for obj in fresh.values():
            self.on_change("SYNC", obj)

    def _apply(self, event: dict[str, Any]) -> None:
        kind, obj = event["type"], event["object"]
        self.resource_version = obj["metadata"]["resourceVersion"]
        if kind == "BOOKMARK":
            return
        if kind == "DELETED":
            gone = self.store.pop(key_of(obj), None)
            if gone is not None:
                for watcher in self.watchers:
                    watcher.changed(gone, None)
        else:
            self.observe(obj)
        self.on_change(kind, obj)

    def observe(self, obj: Obj) -> None:
        """Record an object unless the store holds a newer version: our own writes are
        recorded at once, so the watch may deliver older versions after them, and a cycle
        acting on one (an admitted Workload seen as pending) would admit into its room."""
        current = self.store.get(key_of(obj))
        if current is None or _newer(obj, current):
            self.store[key_of(obj)] = obj
            for watcher in self.watchers:
                watcher.changed(current, obj)


def _newer(candidate: Obj, current: Obj) -> bool:
    try:
        return int(candidate["metadata"]["resourceVersion"]) >= int(
            current["metadata"]["resourceVersion"])
    except (KeyError, ValueError):
        return True
