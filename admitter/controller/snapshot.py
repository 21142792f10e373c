"""The decision core's snapshot, built from the informer caches at one moment."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from admitter.api.clusterqueue import ClusterQueueSpec
from admitter.api.convert import core_cycle_settings, core_queue
from admitter.api.settings import Settings
from admitter.api.workload import WorkloadSpec
from admitter.controller.cache import Caches, job_key
from admitter.controller.pod_index import JobKey
from admitter.controller.queue_holds import Holdings, closed_reason, holdings
from admitter.controller.status import QueueUsage
from admitter.controller.unreadable import UNREADABLE_ERRORS, Unreadable
from admitter.core.decisions import Pending, PendingReason, Snapshot
from admitter.core.model import (
    Node,
    Queue,
    Workload,
    merged_placement,
    recorded_placements,
)
from admitter.core.settle import AdmittedPods, Placement, settle
from admitter.fleet.dispatch import kept_off_workers
from admitter.fleet.fleet import Fleet
from admitter.jobs.interface import ReadyWhenBound
from admitter.jobs.registry import KINDS, JobKinds, job_of
from admitter.jobs.workloads import JOB_NAME_LABEL, job_owner
from admitter.kube.core_values import core_node, core_workload, pod_set_domains
from admitter.kube.devices import NO_DEVICES, DevicesOnNode
from admitter.kube.informer import Key, key_of
from admitter.kube.objects import TERMINAL_POD_PHASES, Obj

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class View:
    """A snapshot plus the objects behind it, so decisions can be applied to them."""

    snapshot: Snapshot
    workloads: dict[str, Obj]
    """Core workload key (`namespace/name`) → Workload object."""
    cluster_queues: dict[str, Obj]
    local_queues: dict[Key, Obj]
    closed: dict[str, Pending]
    """Pending Workloads left out of the snapshot because their queue is missing or being
    deleted, with the reason they wait."""
    orphans: list[Obj] = field(default_factory=list)
    """Unfinished Workloads made for a Job that is gone: left out of the snapshot, to be
    finished."""

    @cached_property
    def holdings(self) -> Holdings:
        """What every queue holds in this view, worked out once for the pass's steps that
        read it (the finalizers, the metrics, the queues' status)."""
        return holdings(self.cluster_queues, self.workloads.values())


@dataclass(slots=True)
class Translation:
    """What one version (resourceVersion) of a Workload object means to the core, and what a
    pass derives from it, kept while its inputs stay the same."""

    version: str | None
    owner: Obj | None
    """The ownerReference naming its Job, if any."""
    expected_pods: int
    """Pods of all its pod sets: ready once the Job reports that many ready or done."""
    inputs: tuple[Any, ...] = ()
    core: Workload | None = None
    placement: Placement | None = None
    settled: Workload | None = None
    """`core` with its pods counted where settling put them, for that `placement`."""
    pods_seen: tuple[Any, ...] = ()
    pods: AdmittedPods | None = None
    """Its admitted pods as settling takes them, for the `core`, bound pods and completions
    seen in `pods_seen`."""

    def core_for(self, wl: Obj, cluster_queue: str, pods_ready: bool) -> Workload:
        """The core Workload, translated again only when something outside the object (its
        ClusterQueue, readiness) changed."""
        inputs = (cluster_queue, pods_ready)
        if self.core is None or self.inputs != inputs:
            self.inputs, self.core = inputs, core_workload(wl, cluster_queue, pods_ready)
            self.settled = None
        return self.core

    def settled_to(self, placement: Placement) -> Workload:
        """The core Workload with its pods counted at `placement` instead of its hints."""
        assert self.core is not None, "core_for comes first"
        if self.settled is None or self.placement != placement:
            self.placement = placement
            self.settled = replace(self.core, placement=merged_placement(placement),
                                   pod_set_placements=placement)
        return self.settled

    def admitted_pods(self, wl: Obj, job: Obj | None, core: Workload,
                      bound: Mapping[JobKey, Mapping[str, int]]) -> AdmittedPods:
        """An admitted workload's hinted and bound pods; a Job has one pod set, and a Workload
        created directly has no pods, so its hints are all there is."""
        pods: tuple[dict[str, int], ...] = tuple({} for _ in core.pod_sets)
        done: tuple[int, ...] = ()
        if job is not None and len(core.pod_sets) == 1:
            meta = job["metadata"]
            pods = (dict(bound.get((job_of(job).kind, meta["namespace"], meta["name"]), {})),)
            done = (int((job.get("status") or {}).get("succeeded", 0)),)
        seen = (core, pods, done)
        if self.pods is None or self.pods_seen != seen:
            domains = pod_set_domains((wl.get("status") or {}).get("admission") or {},
                                      core.pod_sets)
            self.pods_seen = seen
            self.pods = AdmittedPods(core.key, core.pod_sets, tuple(recorded_placements(core)),
                                     pods, domains, done)
        return self.pods


class Translations:
    """Translations kept from pass to pass per Workload uid, and Nodes and ClusterQueues per
    name: translating every object on every pass dominated building the view."""

    def __init__(self) -> None:
        self._last: dict[str, Translation] = {}
        self._seen: dict[str, Translation] = {}
        self._nodes: dict[str, tuple[str | None, dict[str, int], DevicesOnNode, Node]] = {}
        self._nodes_seen: dict[str, tuple[str | None, dict[str, int], DevicesOnNode,
                                          Node]] = {}
        self._queues: dict[str, tuple[str, Queue]] = {}
        """ClusterQueue name → the resourceVersion translated and its core Queue."""
        self._queues_seen: dict[str, tuple[str, Queue]] = {}

    def of(self, wl: Obj) -> Translation:
        meta = wl["metadata"]
        uid = meta.get("uid") or f"{meta['namespace']}/{meta['name']}"
        version = meta.get("resourceVersion")
        found = self._last.get(uid)
        if found is None or found.version != version:
            # Once per version: the spec as the CRD allows it (one not made by admitter may
            # be anything the schema lets through); raises ValueError if it is not.
            WorkloadSpec.model_validate(wl["spec"])
            expected = sum(p["count"] for p in wl["spec"]["podSets"])
            found = Translation(version, job_owner(wl), expected)
        self._seen[uid] = found
        return found

    def forget_unseen(self) -> None:
        """Keep only what the pass just used, so deleted Workloads and Nodes do not linger."""
        self._last, self._seen = self._seen, {}
        self._nodes, self._nodes_seen = self._nodes_seen, {}
        self._queues, self._queues_seen = self._queues_seen, {}

    def queue(self, cq: Obj, order: int) -> Queue:
        """The core Queue of a ClusterQueue at its creation rank `order`, translated (its spec
        validated) again only when the object or its rank changed. Hazard: the object's
        resourceVersion stands for its content, as the API server changes it with every
        write; an object without one (never served) is translated every time. A spec that
        is invalid raises every time, as it is not kept."""
        meta = cq["metadata"]
        version = meta.get("resourceVersion")
        known = self._queues.get(meta["name"])
        if known is None or version is None or known[0] != version or known[1].order != order:
            spec = ClusterQueueSpec.model_validate(cq.get("spec") or {})
            known = (version, core_queue(meta["name"], spec, order))
        if version is not None:
            self._queues_seen[meta["name"]] = known
        return known[1]

    def node(self, node: Obj, used: Mapping[str, int],
             devices: DevicesOnNode = NO_DEVICES) -> Node:
        """The core Node, translated again only when the object, the usage of pods admitter
        does not manage on it or the DRA devices published on it changed."""
        meta = node["metadata"]
        version = meta.get("resourceVersion")
        known = self._nodes.get(meta["name"])
        if known is None or known[0] != version or known[1] != used or known[2] != devices:
            known = (version, dict(used), devices, core_node(node, used, devices))
        self._nodes_seen[meta["name"]] = known
        return known[3]


def build_view(caches: Caches, settings: Settings, now: float, translations: Translations,
               overlay: Mapping[Key, Obj] | None = None,
               unreadable: Unreadable | None = None, usage: QueueUsage | None = None,
               fleet: Fleet | None = None) -> View:
    """`overlay` holds Workloads as decisions being written will make them. An object that
    cannot be translated is left out and recorded in `unreadable`: a Node's capacity is then
    not offered, a Workload waits. `usage` is the reconciler's, kept between passes; without
    it, usage is read from the ClusterQueues' status alone. `fleet` adds the nodes of the
    workers that answer, labelled with their cluster (`fleet.py`)."""
    unreadable = unreadable if unreadable is not None else Unreadable()
    cluster_queues = {cq["metadata"]["name"]: cq for cq in caches.cluster_queues.items()}
    queues = core_queues(cluster_queues, unreadable, translations)
    devices, held = caches.node_devices()
    foreign = caches.foreign_usage(held)
    listed = caches.nodes.items()
    if fleet is not None and fleet.active:  # workers' devices claimed through DRA: not read
        foreign = {**foreign, **fleet.foreign_usage(caches.unfinished_workloads(overlay))}
        listed = [*fleet.own_nodes(listed), *fleet.nodes()]
    nodes = []
    for n in listed:
        try:
            name = n["metadata"]["name"]
            nodes.append(translations.node(n, foreign.get(name, {}),
                                           devices.get(name, NO_DEVICES)))
        except UNREADABLE_ERRORS as error:
            unreadable.add("Node", n, error)
    bound = caches.bound_pods()
    local_queues = {key_of(lq): lq for lq in caches.local_queues.items()}
    queue_of = {key: lq["spec"].get("clusterQueue") or "" for key, lq in local_queues.items()}
    objects: dict[str, Obj] = {}
    closed: dict[str, Pending] = {}
    closed_by_queue: dict[Key, str | None] = {}
    found: list[tuple[Translation, Obj, Workload]] = []
    admitted: list[AdmittedPods] = []
    orphans: list[Obj] = []
    for wl in caches.unfinished_workloads(overlay):
        try:
            translation = translations.of(wl)
            namespace = wl["metadata"]["namespace"]
            job = caches.owned_job(namespace, translation.owner)
            admitted_now = bool((wl.get("status") or {}).get("admission"))
            if job is None and (translation.owner is not None
                                or JOB_NAME_LABEL in (wl["metadata"].get("labels") or {})):
                orphans.append(wl)
                if not admitted_now:
                    continue
                # Hazard: a job the cache lacks may only lag (a replica's watch after a
                # freeze): until the orphan is proven and finished, its admission holds its
                # room, counted at its hints, or a new leader would admit into it.
            place = (namespace, wl["spec"]["queueName"])
            if not admitted_now:
                if place not in closed_by_queue:
                    closed_by_queue[place] = closed_reason(local_queues, cluster_queues, *place)
                why = closed_by_queue[place]
                if why is not None:
                    key = f"{namespace}/{wl['metadata']['name']}"
                    objects[key] = wl
                    closed[key] = Pending(key, "", PendingReason.QUEUE_CLOSED, why, 0)
                    continue
            cq = queue_of.get(place, "")
            copies = fleet.copies(wl) if fleet is not None and fleet.active else []
            ready_job = next((c for _, c in copies if c is not None), job)
            ready = (_pods_ready(wl, ready_job, translation.expected_pods, bound, caches.kinds)
                     if job is not None
                     else _plain_pod_ready(wl, caches.pod_of(wl)))
            core = translation.core_for(wl, cq, ready)
            if not admitted_now and fleet is not None and fleet.active and (
                    refusing := fleet.refusing((translation.owner or {}).get("kind", ""))):
                core = kept_off_workers(core, refusing)
            pods = translation.admitted_pods(wl, job, core, bound) if core.placement else None
        except UNREADABLE_ERRORS as error:
            unreadable.add("Workload", wl, error)
            continue
        found.append((translation, wl, core))
        if pods is not None:
            admitted.append(pods)
    settled = settle(nodes, admitted)
    workloads: list[Workload] = []
    for translation, wl, core in found:
        placement = settled.get(core.key)
        if placement is not None:
            core = translation.settled_to(placement)
        objects[core.key] = wl
        workloads.append(core)
    translations.forget_unseen()
    core_settings = core_cycle_settings(settings)
    if usage is None:
        usage = QueueUsage(core_settings)
    used = usage.observe(cluster_queues, workloads, now)
    snapshot = Snapshot(now, nodes, tuple(caches.topology_levels() or ()), queues, workloads,
                        used, core_settings, usage.ledger.short_gpus(float(math.floor(now))))
    return View(snapshot, objects, cluster_queues, local_queues, closed, orphans)


def core_queues(cluster_queues: dict[str, Obj], unreadable: Unreadable | None = None,
                translations: Translations | None = None) -> list[Queue]:
    """ClusterQueues in creation order; one with an invalid spec is left out (logged, and
    recorded in `unreadable`). `translations` keeps them from pass to pass."""
    ordered = sorted(cluster_queues.values(),
                     key=lambda cq: (cq["metadata"].get("creationTimestamp", ""),
                                     cq["metadata"]["name"]))
    kept = translations if translations is not None else Translations()
    queues = []
    for order, cq in enumerate(ordered):
        try:
            queues.append(kept.queue(cq, order))
        except UNREADABLE_ERRORS as error:  # a pydantic ValidationError is a ValueError
            log.warning("ClusterQueue %s ignored: %s", cq["metadata"]["name"], error)
            if unreadable is not None:
                unreadable.add("ClusterQueue", cq, error)
    return _rooted(queues)


def _rooted(queues: list[Queue]) -> list[Queue]:
    """The queues whose parent chain ends at a root. Two concurrent re-parentings can each
    pass the webhook and close a cycle, and a parent can vanish: such queues (and any below
    them) are left out, logged, instead of failing every pass."""
    parents = {queue.name: queue.parent for queue in queues}
    rooted: dict[str, bool] = {}
    for name in parents:
        chain: list[str] = []
        current: str | None = name
        while current in parents and current not in rooted and current not in chain:
            chain.append(current)
            current = parents[current]
        # None: above a root; known: that verdict; else a missing parent or a cycle.
        verdict = current is None or rooted.get(current, False)
        rooted.update((member, verdict) for member in chain)
    for name in sorted(name for name, ok in rooted.items() if not ok):
        log.warning("ClusterQueue %s ignored: it is in a parent cycle or below a missing "
                    "parent", name)
    return [queue for queue in queues if rooted[queue.name]]


def _pods_ready(wl: Obj, job: Obj | None, expected: int,
                bound: Mapping[JobKey, Mapping[str, int]], kinds: JobKinds = KINDS) -> bool:
    """An admitted gang is ready once its job reports all its `expected` pods ready (or
    done), or, for a kind whose status does not count them (`ReadyWhenBound`), once all run
    on nodes; a Workload without a job (created directly) is ready as soon as admitted."""
    if job is None or not (wl.get("status") or {}).get("admission"):
        return True
    kind = kinds.job_of(job)
    if isinstance(kind, ReadyWhenBound) and kind.pods_ready(job) < expected:
        return sum(bound.get(job_key(job), {}).values()) >= expected
    return kind.pods_ready(job) >= expected


def _plain_pod_ready(wl: Obj, pod: Obj | None) -> bool:
    """An admitted plain Pod is ready once it runs (or ran); a Workload owned by no Pod
    (created directly) as soon as it is admitted."""
    if pod is None or not (wl.get("status") or {}).get("admission"):
        return True
    return (pod.get("status") or {}).get("phase") in ("Running", *TERMINAL_POD_PHASES)
