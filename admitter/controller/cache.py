"""Every kind the controller reads, kept by informers, and the lookups built on them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from admitter.api.contract import QUEUE_LABEL
from admitter.api.convert import cluster_levels
from admitter.api.workload import CONDITION_FINISHED
from admitter.controller.pod_index import JobKey, PodIndex, StartedPod
from admitter.controller.unreadable import UNREADABLE_ERRORS
from admitter.jobs.batch_job import BatchJob
from admitter.jobs.claims import DeviceClaims
from admitter.jobs.projection import JobProjection, PodProjection
from admitter.jobs.registry import KINDS, SUSPENDABLE, JobKinds, job_of, reader_of
from admitter.jobs.workloads import job_owner, resource_of, runtime_resource
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.devices import (
    DeviceKey,
    NodeDevices,
    Published,
    claim_pods,
    held_devices,
    node_devices,
    published_devices,
)
from admitter.kube.informer import Informer, Key, StoreWatcher, key_of
from admitter.kube.objects import Obj, is_true
from admitter.kube.shared import Sharing

log = logging.getLogger(__name__)


def runtime_informers(client: Kube, on_change: Callable[[str, Obj], None],
                      claim_templates: Informer | None, device_classes: Mapping[str, str],
                      ) -> tuple[dict[str, Informer], JobKinds]:
    """An informer per runtime kind of the queued kinds that read runtimes, and the kinds
    reading through them and counting device claims through `claim_templates` (this
    controller's own)."""
    found: dict[str, Informer] = {}
    for job_kind in KINDS.runtime_readers():
        for runtime_kind in job_kind.runtime_kinds:
            found[runtime_kind[0]] = Informer(client, runtime_resource(runtime_kind), on_change,
                                              optional=True)

    def lookup(kind: str, namespace: str, name: str) -> Obj | None:
        return found[kind].get(namespace, name)

    def template(namespace: str, name: str) -> Obj | None:
        return None if claim_templates is None else claim_templates.get(namespace, name)

    return found, JobKinds(lookup, DeviceClaims(dict(device_classes), template))


def job_key(job: Obj) -> JobKey:
    return reader_of(job).kind, *key_of(job)


class LiveWorkloads:
    """The Workloads not yet Finished, kept change by change beside the informer's store.
    Finished Workloads stay in the API (until their Job goes) and outnumber the live ones
    on a busy cluster; a pass needs only these, and walking all of them every pass was the
    largest part of building its view."""

    def __init__(self) -> None:
        self.live: dict[Key, Obj] = {}
        self.watcher = StoreWatcher(self._changed, self._replaced)

    def _changed(self, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            if old is not None:
                self.live.pop(key_of(old), None)
        elif is_true(new, CONDITION_FINISHED):
            self.live.pop(key_of(new), None)
        else:
            self.live[key_of(new)] = new

    def _replaced(self, workloads: Iterable[Obj]) -> None:
        self.live = {key_of(wl): wl for wl in workloads if not is_true(wl, CONDITION_FINISHED)}


@dataclass
class Devices:
    """The DRA objects the controller reads: the templates its jobs' claims name, the
    ResourceSlices and DeviceClasses that say how many devices of each mapped class each node
    has, and the ResourceClaims that hold some of them."""

    claim_templates: Informer
    slices: Informer
    classes: Informer
    claims: Informer
    device_classes: dict[str, str]
    """The settings' DeviceClass → quota resource mapping."""
    warned: set[str] = field(default_factory=set)
    """Warnings logged already: a pass reads the classes again, the log says it once."""
    _published: dict[DeviceKey, Published] | None = None
    """The devices as last read, until a slice or a class changes: passes come far more
    often than drivers republish, and reading every device was most of a pass's DRA cost."""

    def __post_init__(self) -> None:
        stale = StoreWatcher(lambda old, new: self._forget(), lambda objects: self._forget())
        self.slices.watchers.append(stale)
        self.classes.watchers.append(stale)

    def _forget(self) -> None:
        self._published = None

    def all(self) -> list[Informer]:
        return [self.claim_templates, self.slices, self.classes, self.claims]

    def published(self) -> dict[DeviceKey, Published]:
        if self._published is None:
            self._published = published_devices(self.slices.items(), self.classes.items(),
                                                self.device_classes, self._warn)
        return self._published

    def _warn(self, message: str) -> None:
        if message not in self.warned:
            self.warned.add(message)
            log.warning("%s", message)


@dataclass
class Caches:
    nodes: Informer
    pods: Informer
    """Every Pod, of what admitter reads of it (`PodProjection`)."""
    jobs: dict[str, Informer]
    """One informer per kind admitter suspends (`SUSPENDABLE`), of the objects carrying the
    queue label; a kind other than Job may lack its CRD (`Informer.optional`). Each keeps of a
    job what admission reads (`JobProjection`)."""
    workloads: Informer
    cluster_queues: Informer
    local_queues: Informer
    topologies: Informer
    priority_classes: Informer
    pod_index: PodIndex
    live_workloads: LiveWorkloads
    runtimes: dict[str, Informer]
    """The objects some kinds resolve their pod sets from (`ReadsRuntimes`: a TrainJob's
    training runtimes), by kind; optional, as their CRDs may be missing."""
    kinds: JobKinds
    """The job kinds as this controller reads them: those that read runtimes read these
    caches' own."""
    devices: Devices | None = None
    """What Dynamic Resource Allocation publishes, read only when the settings map some
    DeviceClass to a quota resource."""

    @classmethod
    def create(cls, client: Kube, on_change: Callable[[str, Obj], None],
               device_classes: Mapping[str, str] | None = None) -> Caches:
        """`device_classes`: the settings' DeviceClass → quota resource mapping."""
        def informer(kind: kube.Kind, query: dict[str, str] | None = None) -> Informer:
            return Informer(client, kind, on_change, query)

        pod_index, live = PodIndex(), LiveWorkloads()
        pods = Informer(client, kube.PODS, on_change, keep=PodProjection())
        pods.watchers.append(pod_index.pods)
        jobs, projection = {}, JobProjection()
        for name, kind in SUSPENDABLE.items():
            jobs[name] = Informer(client, resource_of(kind), on_change,
                                  {"labelSelector": QUEUE_LABEL}, optional=name != BatchJob.kind,
                                  keep=projection)
            jobs[name].watchers.append(pod_index.jobs(name))
        workloads = Informer(client, kube.WORKLOADS, on_change,
                             keep=Sharing(("spec",), ("status",)))
        workloads.watchers.append(live.watcher)
        devices = None
        if device_classes:
            devices = Devices(
                Informer(client, kube.RESOURCE_CLAIM_TEMPLATES, on_change, optional=True),
                Informer(client, kube.RESOURCE_SLICES, on_change, optional=True),
                Informer(client, kube.DEVICE_CLASSES, on_change, optional=True),
                Informer(client, kube.RESOURCE_CLAIMS, on_change, optional=True),
                dict(device_classes))
        runtimes, kinds = runtime_informers(
            client, on_change, devices.claim_templates if devices else None,
            device_classes or {})
        return cls(
            nodes=informer(kube.NODES),
            pods=pods,
            jobs=jobs,
            workloads=workloads,
            cluster_queues=informer(kube.CLUSTER_QUEUES),
            local_queues=informer(kube.LOCAL_QUEUES),
            topologies=informer(kube.TOPOLOGIES),
            priority_classes=informer(kube.PRIORITY_CLASSES),
            pod_index=pod_index,
            live_workloads=live,
            runtimes=runtimes,
            kinds=kinds,
            devices=devices,
        )

    def all(self) -> list[Informer]:
        return [self.nodes, self.pods, *self.jobs.values(), self.workloads,
                self.cluster_queues, self.local_queues, self.topologies, self.priority_classes,
                *self.runtimes.values(), *(self.devices.all() if self.devices else ())]

    async def wait_synced(self) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in self.all()))

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.all())

    # Lookups -----------------------------------------------------------------------------

    def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        lq = self.local_queues.get(namespace, local_queue)
        return None if lq is None else lq["spec"].get("clusterQueue")

    def priority_of(self, class_name: str | None) -> int:
        if not class_name:
            return 0
        found = self.priority_classes.get("", class_name)
        return int(found.get("value", 0)) if found else 0

    def topology_levels(self) -> list[str] | None:
        """The levels Jobs may name (`cluster_levels`), or None without a Topology."""
        levels = cluster_levels({
            t["metadata"]["name"]: [level["nodeLabel"] for level in t["spec"]["levels"]]
            for t in self.topologies.items()})
        return None if levels is None else list(levels)

    def job_keys(self) -> list[JobKey]:
        return [(kind, *key) for kind, informer in self.jobs.items() for key in informer.store]

    def job(self, key: JobKey) -> Obj | None:
        kind, namespace, name = key
        return self.jobs[kind].get(namespace, name)

    def observe_job(self, job: Obj) -> None:
        """Record a job the controller just wrote, in the informer of its kind."""
        self.jobs[job_of(job).kind].observe(job)

    def jobs_reading(self, runtime: Obj) -> list[JobKey]:
        """The queued jobs whose pod sets are read from `runtime` (a TrainJob's training
        runtime), so a change of it is looked at at once."""
        meta = runtime["metadata"]
        key = (runtime.get("kind"), meta.get("namespace", ""), meta["name"])
        found = []
        for kind in self.kinds.runtime_readers():
            for job in self.jobs[kind.kind].items():
                try:
                    if kind.runtime_key(job) == key:
                        found.append(job_key(job))
                except UNREADABLE_ERRORS:
                    continue  # a pass reports it when it reads the job
        return found

    def job_of(self, workload: Obj) -> Obj | None:
        """The job that owns the Workload, if the cache holds it (the same job: a job
        recreated under the same name owns a Workload of its own)."""
        return self.owned_job(workload["metadata"]["namespace"], job_owner(workload))

    def owned_job(self, namespace: str, owner: Obj | None) -> Obj | None:
        """The job an ownerReference (`job_owner`) names, if the cache holds that very job."""
        if owner is None:
            return None
        job = self.jobs[owner["kind"]].get(namespace, owner["name"])
        if job is None or owner.get("uid") not in (None, job["metadata"].get("uid")):
            return None
        return job

    def pod_of(self, workload: Obj) -> Obj | None:
        """The very Pod that owns the Workload (a plain Pod admitter queued), if the cache
        holds it."""
        for owner in workload["metadata"].get("ownerReferences") or ():
            if owner.get("kind") == "Pod":
                pod = self.pods.get(workload["metadata"]["namespace"], owner.get("name", ""))
                if pod is not None and pod["metadata"].get("uid") == owner.get("uid"):
                    return pod
        return None

    def event_target(self, workload: Obj, job: Obj | None) -> tuple[Obj, str]:
        """Where Events about the Workload go (and their kind): on its job, or the plain Pod
        that owns it, where `kubectl describe` shows them; else on the Workload itself."""
        if job is not None:
            return job, reader_of(job).kind
        pod = self.pod_of(workload)
        return (pod, "Pod") if pod is not None else (workload, "Workload")

    def unfinished_workloads(self, overlay: Mapping[Key, Obj] | None = None) -> list[Obj]:
        """Workloads not Finished, each as `overlay` has it if there (an admission being
        written), and those `overlay` holds over a Finished version in the store: what a pass
        decides on."""
        live = self.live_workloads.live
        if not overlay:
            return list(live.values())
        found = [overlay.get(key, wl) for key, wl in live.items()]
        store = self.workloads.store
        found += [wl for key, wl in overlay.items() if key not in live and key in store]
        return found

    def bound_pods(self) -> dict[JobKey, dict[str, int]]:
        """(kind, namespace, job name) → pods per node, for admitter's jobs' running pods."""
        return self.pod_index.bound

    def node_devices(self) -> tuple[NodeDevices, dict[str, dict[str, int]]]:
        """Per node, the devices DRA drivers publish for the mapped classes, and those that
        claims of pods admitter does not manage hold (foreign usage, as `foreign_usage`):
        none without `deviceClassMappings`."""
        if self.devices is None:
            return {}, {}
        published = self.devices.published()
        return (node_devices(published),
                held_devices(self.devices.claims.items(), published, self._foreign_claim))

    def _foreign_claim(self, claim: Obj) -> bool:
        """A claim no pod of admitter's holds: an admitted job's claims are counted through
        its admission. One whose pods are gone still holds its devices until deallocated."""
        namespace = claim["metadata"]["namespace"]
        for name in claim_pods(claim):
            pod = self.pods.get(namespace, name)
            if pod is None:
                continue
            started = self.pod_index.started.get((namespace, name))
            if (started is not None and self._admits(namespace, started)) or (
                    self.pod_index.managed(pod)):
                return False
        return True

    def foreign_usage(self, devices: Mapping[str, Mapping[str, int]] | None = None,
                      ) -> dict[str, dict[str, int]]:
        """Per node, the requests of running pods that admitter does not manage, and the
        `devices` their claims hold; admitted workloads are counted through their admission
        instead. A plain Pod admitter started is foreign unless its Workload holds an
        admission (evicted, it runs until deleted)."""
        foreign = self.pod_index.foreign
        unadmitted = [started for (namespace, _), started in self.pod_index.started.items()
                      if not self._admits(namespace, started)]
        if not unadmitted and not devices:
            return foreign
        merged = {node: dict(amounts) for node, amounts in foreign.items()}
        held = [(started.node, started.requests) for started in unadmitted]
        for node, amounts in [*held, *(devices or {}).items()]:
            total = merged.setdefault(node, {})
            for resource, amount in amounts.items():
                total[resource] = total.get(resource, 0) + amount
        return merged

    def _admits(self, namespace: str, started: StartedPod) -> bool:
        wl = self.workloads.get(namespace, started.workload)
        return (wl is not None and bool((wl.get("status") or {}).get("admission"))
                and any(owner.get("uid") == started.uid
                        for owner in wl["metadata"].get("ownerReferences") or ()))
