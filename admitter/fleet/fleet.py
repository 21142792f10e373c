"""The fleet as the manager sees it: one `Worker` per WorkerCluster, connected with the
kubeconfig its Secret holds, probed every RESYNC seconds, its state written to the
WorkerCluster's status. A worker that cannot be reached, whose Secret is missing or whose
kubeconfig is wrong gets a `Reachable: False` condition naming why; the others go on. With no
WorkerCluster nothing connects and nothing is added to the model."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import yaml
from kubernetes_asyncio.client.exceptions import ApiException
from pydantic import ValidationError

from admitter.api.errors import InputError
from admitter.api.workercluster import (
    CONDITION_KINDS_SERVED,
    CONDITION_REACHABLE,
    DEFAULT_LOST_GRACE_PERIOD,
    WorkerCluster,
)
from admitter.core.model import GPU
from admitter.core.topology import CLUSTER
from admitter.fleet.worker import (
    COPIED_KINDS,
    Health,
    KubeconfigError,
    Worker,
    client_from_kubeconfig,
)
from admitter.kube import client as kube
from admitter.kube.client import Kube, NotLeading
from admitter.kube.core_values import admitted_cluster
from admitter.kube.informer import READ_ERRORS, Informer
from admitter.kube.objects import Obj, format_time

log = logging.getLogger(__name__)
RESYNC = 10.0
"""Seconds between probes of each worker (and re-reads of its Secret, so a rotated kubeconfig
is used within this long): a worker's state in `kubectl get workerclusters` is that fresh,
and a lost one is noticed well within its grace period, at two small reads per worker."""


class Fleet:
    """The workers of the fleet, kept in step with the WorkerClusters."""

    def __init__(self, client: Kube, namespace: str, on_change: Callable[[str, Obj], None],
                 clock: Callable[[], float] = time.time) -> None:
        self.kube = client
        self.namespace = namespace
        """admitter's own namespace: the only one kubeconfig Secrets are read from."""
        self.on_change = on_change
        self.clock = clock
        self.clusters = Informer(client, kube.WORKER_CLUSTERS, self._cluster_changed,
                                 optional=True)
        self.workers: dict[str, Worker] = {}
        self._unconnected: dict[str, float] = {}
        """Per WorkerCluster the manager has no connection to (its Secret or kubeconfig is
        wrong), since when: past its grace period it is lost, as a worker that stops
        answering is (-inf: it was lost already when its connection went)."""
        self._sources: dict[str, tuple[str, tuple[tuple[str, str], ...], float]] = {}
        """Per worker, the kubeconfig text and labels it was connected with."""
        self._wake = asyncio.Event()

    @property
    def active(self) -> bool:
        """Whether any WorkerCluster exists: only then do the manager's own nodes yield to
        the workers' (`own_nodes`)."""
        return bool(self.clusters.store)

    async def synced(self) -> None:
        """Until the WorkerClusters are listed: no pass decides before it knows the fleet."""
        await self.clusters.synced.wait()

    def _cluster_changed(self, event: str, obj: Obj) -> None:
        self._wake.set()
        self.on_change(event, obj)

    async def run(self) -> None:
        """Keep the WorkerClusters' informer and the workers going, forever."""
        informer = asyncio.create_task(self.clusters.run())
        try:
            await self.clusters.synced.wait()
            while True:
                try:
                    await self.sync()
                except Exception:  # a bug in one pass must not end the fleet
                    log.exception("fleet sync failed; trying again")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RESYNC):
                        await self._wake.wait()
                self._wake.clear()
        finally:
            informer.cancel()
            for worker in self.workers.values():
                await worker.stop()
            self.workers.clear()

    async def sync(self) -> None:
        """Connect new workers, reconnect changed ones, drop removed ones, probe all, and
        report each on its WorkerCluster."""
        wanted = {wc["metadata"]["name"]: wc for wc in self.clusters.items()}
        for name in [n for n in self.workers if n not in wanted]:
            await self._drop(name)
        for name in [n for n in self._unconnected if n not in wanted]:
            del self._unconnected[name]
        # one at a time, a silent worker would hold up the others' probes
        outcomes = await asyncio.gather(*(self._sync_one(name, wc)
                                          for name, wc in wanted.items()),
                                        return_exceptions=True)
        for name, outcome in zip(wanted, outcomes, strict=True):
            if isinstance(outcome, Exception):
                log.warning("fleet: worker %s not synced, trying again: %r", name, outcome)

    async def _sync_one(self, name: str, wc: Obj) -> None:
        before = self.workers.get(name)
        offered = before is not None and before.offered
        was_lost = name in self.lost_unconnected()
        health = await self._connect(name, wc)
        if health is not None:  # not connected: lost once that lasts its grace period
            self._unconnected.setdefault(name, -math.inf if before is not None and (
                before.lost or before.returning) else self.clock())
            if name in self.lost_unconnected() and not was_lost:
                log.warning("fleet: worker %s lost: not connected for %.0fs", name,
                            _grace(wc))
                self.on_change("MODIFIED", wc)  # its Workloads are requeued
        else:
            worker = self.workers[name]
            health = await worker.probe()
            lost = worker.lost
            worker.observed(health, self.clock())
            if worker.lost != lost:
                log.warning("fleet: worker %s lost: silent for %.0fs", name, worker.grace)
                self.on_change("MODIFIED", wc)  # its Workloads are requeued
        if offered != health.reachable:
            self.on_change("MODIFIED", wc)  # its nodes come or go: a pass decides again
        await self._report(wc, health)

    async def _connect(self, name: str, wc: Obj) -> Health | None:
        """(Re)connect the worker if its kubeconfig or labels changed; the reason it cannot
        be, or None once it is connected."""
        try:
            spec = WorkerCluster.model_validate(
                {k: v for k, v in wc.items() if k != "status"}).spec
        except ValidationError as error:
            await self._drop(name)
            problems = InputError.from_validation(f"WorkerCluster {name}", error).problems
            return Health(False, "InvalidSpec",
                          "; ".join(f"{where}: {why}" for where, why in problems))
        ref = spec.kubeconfig
        try:
            secret = await self.kube.get(kube.SECRETS, ref.name, self.namespace)
        except ApiException as error:
            await self._drop(name)
            if error.status == 404:
                return Health(False, "SecretNotFound",
                              f"Secret {self.namespace}/{ref.name} not found")
            return Health(False, "SecretUnreadable", f"Secret {self.namespace}/{ref.name}: "
                          f"{error.status} {kube.brief_reason(error)}")
        encoded = (secret.get("data") or {}).get(ref.key)
        if encoded is None:
            await self._drop(name)
            return Health(False, "SecretKeyMissing",
                          f"Secret {self.namespace}/{ref.name} has no key {ref.key!r}")
        source = (encoded, tuple(sorted(spec.labels.items())), spec.lost_grace_period)
        if self._sources.get(name) == source and name in self.workers:
            return None
        old = self.workers.get(name)
        lost = name in self.lost_unconnected() or (old is not None and (old.lost
                                                                       or old.returning))
        await self._drop(name)
        try:
            kubeconfig = _kubeconfig(encoded)
            client = await client_from_kubeconfig(kubeconfig)
        except KubeconfigError as error:
            return Health(False, "InvalidKubeconfig",
                          f"Secret {self.namespace}/{ref.name} key {ref.key!r}: {error}")
        worker = Worker(name, client, spec.labels, self.on_change, spec.lost_grace_period)
        # Lost before: the copies there of Workloads moved meanwhile go before its nodes do.
        worker.returning = lost
        self._unconnected.pop(name, None)
        worker.start()
        self.workers[name], self._sources[name] = worker, source
        log.info("fleet: connecting to worker %s", name)
        return None

    async def _drop(self, name: str) -> None:
        worker = self.workers.pop(name, None)
        self._sources.pop(name, None)
        if worker is not None:
            log.info("fleet: disconnecting from worker %s", name)
            await worker.stop()
            self.on_change("DELETED", {"kind": "WorkerCluster", "metadata": {"name": name}})

    async def _report(self, wc: Obj, health: Health) -> None:
        """Write the worker's state on its WorkerCluster, only when it changed."""
        worker = self.workers.get(wc["metadata"]["name"])
        nodes = worker.nodes.items() if worker is not None and health.reachable else []
        status = wc.get("status") or {}
        wanted = [(CONDITION_REACHABLE, health.reachable, health.reason, health.message)]
        if worker is not None and health.reachable:
            wanted.append(_kinds_served(worker))
        fresh: dict[str, Any] = {
            "nodes": len(nodes),
            "gpus": sum(_gpus(node) for node in nodes),
            "lastError": status.get("lastError", "") if health.reachable else health.message,
        }
        shown = {c.get("type"): c for c in status.get("conditions") or ()}
        conditions = []
        for kind, true, reason, message in wanted:
            before = shown.get(kind) or {}
            flag = "True" if true else "False"
            since = (before.get("lastTransitionTime") if before.get("status") == flag
                     else None) or format_time(self.clock())
            conditions.append({"type": kind, "status": flag, "reason": reason,
                               "message": message, "lastTransitionTime": since})
        same = (conditions == list(status.get("conditions") or ())
                and all(status.get(k, 0 if k != "lastError" else "") == v
                        for k, v in fresh.items()))
        if same:
            return
        fresh["conditions"] = conditions
        try:
            updated = await self.kube.patch(kube.WORKER_CLUSTERS, wc["metadata"]["name"],
                                            {"status": fresh}, subresource="status")
        except NotLeading:
            return  # a follower keeps its connections warm; the leader reports
        except READ_ERRORS as error:
            log.warning("WorkerCluster %s: status not written: %s", wc["metadata"]["name"],
                        error)
            return
        self.clusters.observe(updated)

    # What the reconciler reads ----------------------------------------------------------

    def own_nodes(self, nodes: list[Obj]) -> list[Obj]:
        """The manager's own nodes it offers: all of them without WorkerClusters; in a fleet
        only those that name a cluster (the manager counted as a worker of its own)."""
        if not self.active:
            return nodes
        return [n for n in nodes if CLUSTER in (n["metadata"].get("labels") or {})]

    def names(self) -> list[str]:
        """The workers' names: the `admitter.dev/cluster` values of their nodes."""
        return [wc["metadata"]["name"] for wc in self.clusters.items()]

    def reachable(self) -> dict[str, bool]:
        """Per WorkerCluster, whether the manager reaches it (its Reachable condition)."""
        return {name: name in self.workers and self.workers[name].health.reachable
                for name in self.names()}

    def refusing(self, kind: str) -> list[str]:
        """The workers a job of `kind` may not be placed in: all for a kind never copied,
        and those that do not serve its CRD."""
        return [name for name in self.names()
                if kind not in COPIED_KINDS or ((worker := self.workers.get(name)) is not None
                                                and not worker.serves(kind))]

    def nodes(self) -> list[Obj]:
        """The nodes of every worker that answers, labelled with their cluster."""
        registered = set(self.names())
        return [node for name, worker in self.workers.items()
                if worker.offered and name in registered for node in worker.model_nodes()]

    def foreign_usage(self, workloads: Iterable[Obj]) -> dict[str, dict[str, int]]:
        """Per worker node, the requests of pods that no admission among `workloads`
        counts."""
        admitted = {wl["metadata"].get("uid") for wl in workloads
                    if (wl.get("status") or {}).get("admission")}
        merged: dict[str, dict[str, int]] = {}
        for worker in self.workers.values():
            merged.update(worker.foreign_usage(admitted))
        return merged

    def runs_elsewhere(self, wl: Obj, own_nodes: Informer) -> bool:
        """Whether the Workload's admission places it outside the manager's own nodes: then
        it runs as a copy in a worker, never here, even while that worker is not connected
        (a manager just started: its job must not be started in place meanwhile)."""
        admission = (wl.get("status") or {}).get("admission") or {}
        cluster = admitted_cluster(wl)
        if cluster is not None and (self.clusters.get("", cluster) is not None or not any(
                (node["metadata"].get("labels") or {}).get(CLUSTER) == cluster
                for node in own_nodes.items())):
            return True  # a worker's, registered or no longer: never started here
        if not self.active:
            return False
        return any(own_nodes.get("", hint.get("node", "")) is None
                   for hint in admission.get("nodeHints") or ())

    def lost_unconnected(self) -> set[str]:
        """The WorkerClusters not connected (their Secret or kubeconfig wrong) for longer
        than their grace period: their Workloads are requeued, as a lost worker's are."""
        now = self.clock()
        return {name for name, since in self._unconnected.items() if name not in self.workers
                and (wc := self.clusters.get("", name)) is not None
                and now - since >= _grace(wc)}

    def clusters_known(self, own_nodes: Informer) -> set[str]:
        """The clusters an admission may name: the WorkerClusters and the clusters the
        manager's own nodes are labelled with. An admission naming another was made onto a
        WorkerCluster since deleted."""
        own = {labels[CLUSTER] for node in own_nodes.items()
               if CLUSTER in (labels := node["metadata"].get("labels") or {})}
        return {*self.names(), *own}

    def worker_of(self, wl: Obj) -> Worker | None:
        """The worker whose nodes the Workload's admission names, if any."""
        admission = (wl.get("status") or {}).get("admission") or {}
        cluster = admitted_cluster(wl)
        if cluster in self.workers:
            return self.workers[cluster]
        hinted = {hint.get("node") for hint in admission.get("nodeHints") or ()}
        for worker in self.workers.values():
            if any(worker.nodes.get("", node) is not None for node in hinted if node):
                return worker
        return None

    def copies(self, wl: Obj) -> list[tuple[Worker, Obj | None]]:
        """The workers still running a copy of the Workload (or its pods), each with the
        copy if its job is still there; a lost worker's are not waited for."""
        uid = wl["metadata"].get("uid", "")
        return [(worker, worker.copy_of(uid)) for worker in self.managed()
                if worker.runs_copy(uid)]

    def managed(self) -> list[Worker]:
        """The workers whose copies the manager looks after: not lost, and still registered
        (a deleted WorkerCluster's worker is dropped moments later; meanwhile nothing of its
        is touched, so what is left there does not depend on that moment)."""
        registered = set(self.names())
        return [worker for name, worker in self.workers.items()
                if not worker.lost and name in registered]


def _grace(wc: Obj) -> float:
    """The WorkerCluster's `lostGracePeriod`, or the default when its spec is invalid."""
    try:
        return WorkerCluster.model_validate(
            {k: v for k, v in wc.items() if k != "status"}).spec.lost_grace_period
    except ValidationError:
        return DEFAULT_LOST_GRACE_PERIOD


def _kinds_served(worker: Worker) -> tuple[str, bool, str, str]:
    """The `KindsServed` condition: which copied kinds the worker lacks the CRD of."""
    missing = worker.unserved()
    if not missing:
        return (CONDITION_KINDS_SERVED, True, "AllServed",
                f"copies of {', '.join(COPIED_KINDS)} are created here")
    return (CONDITION_KINDS_SERVED, False, "CRDMissing",
            f"the worker does not serve {', '.join(missing)} (its CRD is not installed): "
            f"no {', '.join(missing)} is placed here; its operator and CRD are needed")


def _kubeconfig(encoded: str) -> Mapping[str, Any]:
    try:
        loaded = yaml.safe_load(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError, yaml.YAMLError) as error:
        raise KubeconfigError(f"not a kubeconfig: {error}") from None
    if not isinstance(loaded, dict) or not loaded.get("clusters"):
        raise KubeconfigError("not a kubeconfig: it names no clusters")
    return loaded


def _gpus(node: Obj) -> int:
    try:
        return int(((node.get("status") or {}).get("allocatable") or {}).get(GPU, 0))
    except (TypeError, ValueError):
        return 0
