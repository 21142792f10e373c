"""Deletion safety: a ClusterQueue or LocalQueue that holds admitted Workloads carries
admitter's finalizer, so deleting it waits until they finish or are evicted (Kueue's
`resource-in-use`); while it waits it admits nothing new, and its status says what it waits
for. A ClusterQueue holds its whole subtree's Workloads: deleting a parent would orphan them.

Each pass adds the finalizer to the queues its admissions go to before writing them (a queue
whose deletion began meanwhile refuses the new finalizer, and the admission is dropped), and
removes it from queues being deleted that hold nothing, and from queues that have held nothing
for RELEASE_AFTER. Passes run one after another, so an add and a remove never race each other.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.workload import Reason
from admitter.core.decisions import Admission
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.informer import Key, key_of
from admitter.kube.objects import Obj

log = logging.getLogger(__name__)
IN_USE_FINALIZER = "admitter.dev/resource-in-use"
"""Kept on a queue while Workloads are admitted through it (as Kueue's
`kueue.k8s.io/resource-in-use`), so a deleted queue goes only once nothing it admitted still
runs on its quota."""
RELEASE_AFTER = 60.0
"""Seconds a queue holds nothing before its finalizer is removed; a queue being deleted loses
it as soon as it holds nothing, so no deletion waits for this. Short jobs leave their queue
empty between one another, and adding and removing the finalizer around each one cost two
writes per admission (a conditional patch, often after a read) on a shape of many queues
(BENCHMARKS.md, Kueue's large-scale shape); the finalizer matters only to a queue being
deleted. Hazard: a controller stopped within this time leaves the finalizer on an idle queue,
as on one still holding Workloads, and deleting that queue then waits for a controller."""
NAMED = 3
"""Workloads a deleted queue's message names while it waits for them; the rest are counted: a
few names show where to look, and the condition's message stays one line however many hold
the queue."""


def terminating(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def cluster_queue_path(cluster_queues: Mapping[str, Obj], leaf: str) -> list[str]:
    """The leaf and its ancestors that exist, leaf first (a cycle is cut where it closes)."""
    path: list[str] = []
    name: str | None = leaf
    while name is not None and name in cluster_queues and name not in path:
        path.append(name)
        name = (cluster_queues[name].get("spec") or {}).get("parent")
    return path


@dataclass
class Holdings:
    """Per queue, the keys (`namespace/name`) of the admitted Workloads it holds."""

    cluster_queues: dict[str, list[str]] = field(default_factory=dict)
    local_queues: dict[Key, list[str]] = field(default_factory=dict)

    def add(self, cluster_queues: Mapping[str, Obj], leaf: str, local_queue: Key,
            key: str) -> None:
        for name in cluster_queue_path(cluster_queues, leaf):
            self.cluster_queues.setdefault(name, []).append(key)
        self.local_queues.setdefault(local_queue, []).append(key)

    def of(self, queue: Obj) -> list[str]:
        meta = queue["metadata"]
        if meta.get("namespace"):
            return self.local_queues.get((meta["namespace"], meta["name"]), [])
        return self.cluster_queues.get(meta["name"], [])


def holdings(cluster_queues: Mapping[str, Obj], workloads: Iterable[Obj]) -> Holdings:
    """What every queue holds: the Workloads whose admission is recorded (or being written)."""
    held = Holdings()
    for wl in workloads:
        admission = (wl.get("status") or {}).get("admission")
        if admission:
            meta = wl["metadata"]
            held.add(cluster_queues, admission["clusterQueue"],
                     (meta["namespace"], wl["spec"]["queueName"]),
                     f"{meta['namespace']}/{meta['name']}")
    return held


def active_condition(queue: Obj, held: Sequence[str]) -> tuple[str, str, str]:
    """(status, reason, message) of the queue's `Active` condition."""
    if not terminating(queue):
        return "True", Reason.READY, "admitting workloads"
    if not held:
        return "False", Reason.TERMINATING, "being deleted; admits nothing new"
    named = ", ".join(sorted(held)[:NAMED])
    more = f" and {len(held) - NAMED} more" if len(held) > NAMED else ""
    return "False", Reason.TERMINATING, (
        f"being deleted: waits for {len(held)} admitted Workload(s) to finish or be evicted "
        f"({named}{more}); admits nothing new")


def outside_tree_condition(cluster_queues: Mapping[str, Obj],
                           name: str) -> tuple[str, str, str] | None:
    """(status, reason, message) of the `Active` condition of a ClusterQueue the controller
    leaves out of its tree (on or below a parent cycle, or below a missing parent), whose
    admissions are held until a parent changes; None when its chain reaches a root. Two
    concurrent re-parentings can each pass the webhook and close a cycle; this names it."""
    path = cluster_queue_path(cluster_queues, name)
    top = path[-1]
    parent = (cluster_queues[top].get("spec") or {}).get("parent")
    if parent is None:
        return None
    if parent not in path:
        return "False", Reason.PARENT_MISSING, (
            f"ClusterQueue {top!r} names the parent {parent!r}, which does not exist; admits "
            "nothing until it does or the parent changes")
    cycle = path[path.index(parent):]
    shown = " -> ".join([*cycle, parent])
    where = "in" if name in cycle else "below"
    return "False", Reason.PARENT_CYCLE, (
        f"{where} the parent cycle {shown} (each queue's parent follows it); admits nothing "
        "until a parent on it changes")


def closed_reason(local_queues: Mapping[Key, Obj], cluster_queues: Mapping[str, Obj],
                  namespace: str, queue_name: str) -> str | None:
    """Why a pending Workload of this LocalQueue cannot be admitted now, if its queue is
    missing or being deleted; None when it is open."""
    lq = local_queues.get((namespace, queue_name))
    if lq is None:
        return f"LocalQueue {queue_name!r} does not exist in namespace {namespace!r}"
    if terminating(lq):
        return f"LocalQueue {queue_name!r} is being deleted; move the Job to another LocalQueue"
    leaf = (lq.get("spec") or {}).get("clusterQueue") or ""
    if leaf not in cluster_queues:
        return (f"LocalQueue {queue_name!r} points to ClusterQueue {leaf!r}, which does not "
                "exist")
    for name in cluster_queue_path(cluster_queues, leaf):
        if terminating(cluster_queues[name]):
            return (f"ClusterQueue {name!r} is being deleted; move the Job to a LocalQueue of "
                    "another ClusterQueue")
    return None


class QueueClosing(Exception):
    """A queue an admission goes to could not be held: its deletion began, or it is gone."""


class QueueFinalizers:
    """The finalizer writes, in the background like the admissions that wait for them: a
    pass never waits on the API server. Writes to one queue go out one after another."""

    def __init__(self, client: Kube, observe: Callable[[Obj], None]) -> None:
        self.kube = client
        self.observe = observe
        """Shows a written queue to the informer caches, so the next pass builds on it."""
        self._writing: dict[Key, tuple[bool, asyncio.Task[bool]]] = {}
        """Per queue, the last finalizer write asked for (add or remove) and its task."""
        self._holds: dict[str, list[asyncio.Task[bool]]] = {}
        """Per admission being written, the additions it waits for."""
        self._idle_since: dict[Key, float] = {}
        """Per queue holding nothing (and not being deleted), since when this process saw it
        so (a new leader starts counting afresh: its queues keep the finalizer a little
        longer)."""

    def sync(self, cluster_queues: Mapping[str, Obj], local_queues: Mapping[Key, Obj],
             workloads: Mapping[str, Obj], held: Holdings, admissions: Sequence[Admission],
             now: float) -> None:
        """Hold every queue that holds (`held`, of `workloads`), or is about to hold,
        admitted Workloads; release those being deleted that hold nothing, and those that
        have held nothing for RELEASE_AFTER. Each of `admissions` then waits for its queues
        (`held`)."""
        starting = Holdings()
        for admission in admissions:
            wl = workloads[admission.key]
            starting.add(cluster_queues, admission.queue,
                         (wl["metadata"]["namespace"], wl["spec"]["queueName"]), admission.key)
        adding: dict[str, list[asyncio.Task[bool]]] = {}
        idle: dict[Key, float] = {}
        for queue in [*cluster_queues.values(), *local_queues.values()]:
            keys = [*held.of(queue), *starting.of(queue)]
            if not keys and not terminating(queue):
                place = key_of(queue)
                idle[place] = since = self._idle_since.get(place, now)
                if now - since < RELEASE_AFTER:
                    continue  # kept for the next short job, or released later
            task = self._write(queue, bool(keys))
            if task is not None and keys:
                for key in keys:
                    adding.setdefault(key, []).append(task)
        self._idle_since = idle  # queues gone or holding again start afresh
        for admission in admissions:
            self._holds[admission.key] = adding.get(admission.key, [])

    async def held(self, admission: str) -> None:
        """Wait until the admission's queues carry the finalizer; QueueClosing if one
        refused it."""
        for task in self._holds.pop(admission, []):
            if not await asyncio.shield(task):
                raise QueueClosing(f"a queue of {admission} is being deleted or gone")

    def _write(self, queue: Obj, hold: bool) -> asyncio.Task[bool] | None:
        """The write that gives the queue the finalizer (`hold`) or takes it away, started
        unless the cache shows it done or the same write is under way; its task, if any."""
        key = key_of(queue)
        wanted = self._writing.get(key)
        if wanted is not None and not wanted[1].done():
            if wanted[0] == hold:
                return wanted[1]
        elif (IN_USE_FINALIZER in (queue["metadata"].get("finalizers") or ())) == hold or (
                hold and terminating(queue)):
            return None  # done, or impossible (no finalizer is added once deletion began)
        previous = None if wanted is None else wanted[1]
        task = asyncio.create_task(self._set(queue, hold, previous))
        self._writing[key] = (hold, task)
        task.add_done_callback(lambda done: self._forget(key, done))
        return task

    def _forget(self, key: Key, done: asyncio.Task[bool]) -> None:
        if self._writing.get(key, (False, None))[1] is done:
            del self._writing[key]

    async def _set(self, queue: Obj, hold: bool, previous: asyncio.Task[bool] | None) -> bool:
        """Add or remove the finalizer, after the previous write to this queue; False when it
        could not be added. The list is replaced whole, so the write is conditional on the
        version read, and a version the cache had not seen yet (the status writer changes
        queues all the time) is read anew once."""
        if previous is not None:
            await asyncio.wait([previous])
        meta = queue["metadata"]
        kind = kube.LOCAL_QUEUES if meta.get("namespace") else kube.CLUSTER_QUEUES
        for attempt in range(2):
            try:
                if attempt or previous is not None:
                    meta = (await self.kube.get(kind, meta["name"], meta.get("namespace")))[
                        "metadata"]
                others = [f for f in meta.get("finalizers") or () if f != IN_USE_FINALIZER]
                finalizers = [*others, IN_USE_FINALIZER] if hold else others
                patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                                      "finalizers": finalizers}}
                self.observe(await self.kube.patch(kind, meta["name"], patch,
                                                   meta.get("namespace")))
                return True
            except ApiException as error:
                if kube.is_conflict(error) and not attempt:
                    continue
                # Gone, or being deleted (no finalizer may be added then): a later pass
                # looks again.
                log.info("finalizer of %s %s not %s: %s", kind.plural, "/".join(key_of(queue)),
                         "added" if hold else "removed", error.reason)
                break
        return not hold
