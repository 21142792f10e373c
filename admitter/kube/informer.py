"""List-then-watch caches of API objects, resumed from the last resourceVersion.

Each informer keeps the current objects of one kind in memory and calls `on_change` after
every event so the reconciler can schedule a cycle. A watch that ends is resumed from the last
resourceVersion seen (bookmarks keep it fresh); a 410 Gone means that version was compacted
away, so the informer lists again and replaces its store, as client-go's reflector does.
An API server that cannot be reached is tried again with backoff, forever: an informer never
ends while the process runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.kube.client import CONNECTION_ERRORS, Kind, Kube
from admitter.kube.objects import Obj

log = logging.getLogger(__name__)
READ_ERRORS: tuple[type[BaseException], ...] = (ApiException, *CONNECTION_ERRORS)
"""What a read raises when the API server cannot answer it (stopped, restarting)."""
ABSENT_RETRY = 60.0
"""Seconds between looks for an optional kind the API server does not serve: its CRD comes
with an operator installed later, so a minute is soon enough to start queueing its jobs, and
one list a minute per missing kind costs the API server nothing."""
WATCH_BACKOFF_FIRST = 0.5
"""Seconds an informer waits after its watch or list first fails: a watch cut by an API server
that restarts or hands over is usually served again within a second (client-go's reflector
starts at 0.8 s)."""
WATCH_BACKOFF_MOST = 10.0
"""The longest wait between tries, doubling from WATCH_BACKOFF_FIRST (from the sixth failure in a
row on): once an outage ends, a cache catches up within this long, and passes decide from the
caches; client-go's reflector waits up to 30 s, but one request per informer every 10 s is
already no load on an API server that is coming back."""
REFRESH_RETRY = 1.0
"""Seconds between tries of `refresh`: a new leader awaits it before its first pass, so it is
tried again as soon as an API server back from a restart may answer; one list a second from
one replica is no load."""
Key = tuple[str, str]
"""(namespace or "", name)."""
_DELETED = "(deleted)"
"""Stands for the version of an object the controller deleted: no watch event matches it."""
UNREAD_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
"""Annotations no part of admitter reads, dropped from cached objects with `managedFields`:
`kubectl apply` leaves a whole copy of the object in this one."""
DELIVERED_KEPT = 4
"""Versions per object remembered from the watch: a write of ours whose answer comes back
after the watch delivered its version, and this many more, is recognised as old."""


def lean(obj: Obj) -> Obj:
    """`obj` without what admitter never reads: its managedFields (a third of a served Job),
    UNREAD_ANNOTATIONS, and a Node's list of the images it holds (kubelet reports up to 50,
    each with its names and size: most of a served Node), as client-go's informers strip
    managedFields.

    Hazard: a cached object is not the whole object. admitter writes patches only; writing a
    cached object back whole (PUT) would erase these fields on the server."""
    meta = obj.get("metadata")
    if meta:
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if annotations:
            for name in UNREAD_ANNOTATIONS:
                annotations.pop(name, None)
    if obj.get("kind") == "Node" and isinstance(obj.get("status"), dict):
        obj["status"].pop("images", None)
    return obj


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
                 query: dict[str, str] | None = None, optional: bool = False,
                 keep: Callable[[Obj], Obj] | None = None) -> None:
        self.kube = kube
        self.kind = kind
        self.keep = keep
        """What the store keeps of each object beyond `lean` (a projection of what the
        controller reads, `jobs.projection`), or the object as it came."""
        self.optional = optional
        """A kind whose CRD may not be installed (a job kind other than Job): while the API
        does not serve it, the store stays empty and synced, and it is looked for again every
        ABSENT_RETRY, told once in the log rather than as a failing watch."""
        self._absent = False
        self.query = query or {}
        self.on_change = on_change
        self.store: dict[Key, Obj] = {}
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0
        self.watchers: list[StoreWatcher] = []
        self._written: dict[Key, str] = {}
        """Objects the controller wrote itself and recorded at once (`observe`): the version
        written, until the watch delivers it."""
        self._delivered: dict[Key, deque[str]] = {}
        """Per object, the last few versions the watch delivered."""
        self._reads: list[set[Key]] = []
        """For each read of the API under way (`reading`), the objects changed meanwhile."""

    @property
    def served(self) -> bool:
        """False while the API server does not serve an optional kind (its CRD is missing)."""
        return not self._absent

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.store.get((namespace, name))

    def items(self) -> list[Obj]:
        return list(self.store.values())

    async def run(self) -> None:
        """List, then watch forever; re-list on 410 Gone, back off on other errors."""
        backoff = WATCH_BACKOFF_FIRST
        while True:
            try:
                if not self.resource_version:
                    await self._list()
                async for event in self.kube.watch(self.kind, self.resource_version,
                                                   self.query):
                    self._apply(event)
                    backoff = WATCH_BACKOFF_FIRST
            except ApiException as error:
                if self.optional and error.status == 404 and not self.store:
                    await self._wait_absent()
                    continue
                if error.status == 410:
                    log.info("%s: resourceVersion %s expired, re-listing",
                             self.kind.plural, self.resource_version)
                    self.relisting()
                    continue
                log.warning("%s watch failed: %s", self.kind.plural, error)
            except CONNECTION_ERRORS as error:
                log.warning("%s watch interrupted: %r", self.kind.plural, error)
            except Exception:  # a bug must not end the cache: log it, list again
                log.exception("%s: informer failed, listing again", self.kind.plural)
                self.relisting()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, WATCH_BACKOFF_MOST)

    async def _wait_absent(self) -> None:
        """The API does not serve the kind: empty and synced until it does."""
        if not self._absent:
            log.info("%s: not served by the API server (its CRD is not installed); not "
                     "queued until it is", self.kind.plural)
        self._absent = True
        self.resource_version = ""
        self.synced.set()
        await asyncio.sleep(ABSENT_RETRY)

    def relisting(self) -> None:
        """The watch cannot go on from the version held: list afresh. Until the list is in,
        the store is not proven to hold everything a newer list would, and `synced` says so
        (no pass decides meanwhile)."""
        self.resource_version = ""
        self.synced.clear()

    async def refresh(self) -> None:
        """Read every object afresh and record each one (`observe_read`), keeping the watch
        going: the store is then at least as new as this read, whatever the watch lags.
        Tried until the API server answers."""
        while True:
            try:
                with self.reading() as touched:
                    items = (await self._read())[0]
                break
            except READ_ERRORS as error:
                log.warning("%s not read afresh, trying again: %r", self.kind.plural, error)
            await asyncio.sleep(REFRESH_RETRY)
        for item in items:
            self.observe_read(item, touched)

    @contextlib.contextmanager
    def reading(self) -> Iterator[set[Key]]:
        """The objects that change in the store while the block reads the API."""
        touched: set[Key] = set()
        self._reads.append(touched)
        try:
            yield touched
        finally:
            self._reads.remove(touched)

    def _touch(self, keys: Iterable[Key]) -> None:
        for touched in self._reads:
            touched.update(keys)

    def observe_read(self, obj: Obj, touched: set[Key]) -> None:
        """Record an object read from the API (`reading` gave `touched`). The read is at
        least as new as whatever the store held when it began, so it is recorded as our own
        write is, older watch events skipped until the watch reaches it. If the store changed
        meanwhile (the watch, a write of ours, a re-list), the read is recorded only if its
        version is the newer one (`newer`). Hazard: a watch that lags far behind (a replica
        resumed after a freeze replays what it missed) touches most objects during the read;
        keeping the store's version for all of them left a new leader counting Workloads as
        pending that another leader had admitted, and admitting into their room."""
        key = key_of(obj)
        current = self.store.get(key)
        version = obj["metadata"].get("resourceVersion")
        if current is not None and current["metadata"].get("resourceVersion") == version:
            return
        if key in touched and (current is None or not newer(
                version, current["metadata"].get("resourceVersion"))):
            return  # gone meanwhile, or the watch overtook the read
        self.observe(obj)

    async def _read(self) -> tuple[list[Obj], str]:
        """Every object (each with its kind), and the version of the list."""
        listed = await self.kube.list(self.kind, self.query)
        kind_name = listed.get("kind", "").removesuffix("List")
        items = listed.get("items", [])
        for item in items:
            item.setdefault("kind", kind_name)
        return [self._kept(item) for item in items], listed["metadata"]["resourceVersion"]

    async def _list(self) -> None:
        items, version = await self._read()
        if self._absent:
            self._absent = False
            log.info("%s: served by the API server now; queued from here on", self.kind.plural)
        fresh = {key_of(item): item for item in items}
        # Hazard: a write of ours that returned while the list was being read is newer than
        # the list. Replaced by the listed version, an admitted Workload showed as pending
        # until the new watch caught up, and a pass in between admitted into its room (the
        # fault soak, a relist after an API server restart: 66 GPUs admitted on 64).
        ahead = {key: obj for key, obj in self.store.items()
                 if newer(obj["metadata"].get("resourceVersion"), version)}
        fresh.update(ahead)
        gone = [obj for key, obj in self.store.items() if key not in fresh]
        self._touch([*fresh, *self.store])
        self.store = fresh
        # the list is at least as new as every other write that returned
        self._written = {key: v for key, v in self._written.items() if key in ahead}
        self._delivered.clear()
        for watcher in self.watchers:
            watcher.replaced(fresh.values())
        self.resource_version = version
        self.relists += 1
        self.synced.set()
        for obj in gone:
            self.on_change("DELETED", obj)
        for obj in fresh.values():
            self.on_change("SYNC", obj)

    def _apply(self, event: dict[str, Any]) -> None:
        kind, obj = event["type"], self._kept(event["object"])
        self.resource_version = obj["metadata"]["resourceVersion"]
        if kind == "BOOKMARK":
            return
        key = key_of(obj)
        self._touch([key])
        if kind == "DELETED":
            self._written.pop(key, None)
            self._delivered.pop(key, None)
            current = self.store.get(key)
            if current is not None and _uid(current) in (None, _uid(obj)):
                self._remove(key)
            # else: the name was reused by an object made since (ours, already recorded)
        else:
            version = obj["metadata"]["resourceVersion"]
            delivered = self._delivered.setdefault(key, deque(maxlen=DELIVERED_KEPT))
            delivered.append(version)
            written = self._written.get(key)
            if written is None or written == version:
                self._written.pop(key, None)
                self._store(key, obj)
            # else: a version older than our own write, which the store already holds
        self.on_change(kind, obj)

    def observe(self, obj: Obj) -> None:
        """Record an object the controller just wrote (or read), unless the watch already
        delivered that version (the store then holds it or a newer one). Our own writes are
        recorded at once, so the watch may deliver older versions after them, and a cycle
        acting on one (an admitted Workload seen as pending) would admit into its room; they
        are skipped until the watch reaches the version written. resourceVersions are
        opaque (Kubernetes promises no order), so "older" means "delivered before ours"."""
        obj = self._kept(obj)
        key = key_of(obj)
        self._touch([key])
        version = obj["metadata"].get("resourceVersion")
        if version is not None and version in self._delivered.get(key, ()):
            return
        if version is not None:
            self._written[key] = version
        self._store(key, obj)

    def _kept(self, obj: Obj) -> Obj:
        """What the store keeps of `obj` (`lean` changes `obj` itself; `keep` makes a new
        object)."""
        lean(obj)
        return obj if self.keep is None else self.keep(obj)

    def forget(self, obj: Obj) -> None:
        """Drop an object the controller just deleted; watch events for it are ignored until
        the watch delivers its deletion (or the controller records a new object there)."""
        key = key_of(obj)
        self._touch([key])
        current = self.store.get(key)
        if current is None or _uid(current) != _uid(obj):
            return  # the watch delivered the deletion already (and maybe a successor)
        self._written[key] = _DELETED
        self._remove(key)

    def _remove(self, key: Key) -> None:
        gone = self.store.pop(key)
        for watcher in self.watchers:
            watcher.changed(gone, None)

    def _store(self, key: Key, obj: Obj) -> None:
        current = self.store.get(key)
        self.store[key] = obj
        for watcher in self.watchers:
            watcher.changed(current, obj)


def newer(version: str | None, than: str | None) -> bool:
    """Whether resourceVersion `version` is newer than `than`, both of one resource. They
    compare as integers (KEP-5504, stable in Kubernetes 1.35: positive decimal integers
    without leading zeros); a version that is not one is never taken for the newer."""
    if version is None or than is None or not (_integer(version) and _integer(than)):
        return False
    return (len(version), version) > (len(than), than)


def _integer(version: str) -> bool:
    return version.isascii() and version.isdigit() and not version.startswith("0")


def _uid(obj: Obj) -> str | None:
    uid: str | None = obj["metadata"].get("uid")
    return uid
