"""The manager's read-only view of one worker cluster: its nodes, its pods and the copies of
admitted jobs it runs, each kept by an informer over a client built from the worker's
kubeconfig (read from a Secret, never from a file)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.quantity import to_base_units
from admitter.api.workercluster import DEFAULT_LOST_GRACE_PERIOD
from admitter.core.topology import CLUSTER
from admitter.jobs.batch_job import BatchJob
from admitter.jobs.jobset import JobSet
from admitter.jobs.rayjob import RayJob
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.informer import READ_ERRORS, Informer, Key, StoreWatcher, key_of
from admitter.kube.objects import TERMINAL_POD_PHASES, Obj, pod_requests

log = logging.getLogger(__name__)
PROBE_TIMEOUT = 10.0
"""Seconds a worker has to answer a probe before it counts as unreachable: an API server
answers `/version` in milliseconds, and across regions well within a second, so ten seconds
of silence is an outage rather than latency; what then befalls the worker's jobs waits for
its far longer grace period (five minutes by default)."""
COPY_LABEL = "admitter.dev/workload-uid"
"""On a job the manager created in a worker (and its pods' template): the uid of the
manager's Workload it runs for. It makes creation idempotent (a copy found under the job's name
with this uid is adopted, with another uid it is stale) and tells the copy's pods, counted
through the Workload's admission, from the worker's own. A JobSet's copy carries it on the
JobSet and its pod templates, not on its child Jobs; a RayJob's on the RayJob and its Ray
pods' and submitter's templates, not on the RayCluster or the submitter Job KubeRay makes
from it."""
COPIED_KINDS = (BatchJob.kind, JobSet.kind, RayJob.kind)
"""The kinds the manager creates copies of in workers; a worker that does not serve one (its
CRD is missing) takes no job of that kind (`Worker.serves`). TrainJobs and plain Pods are
placed on the manager's own nodes only (`dispatch.kept_off_workers`): a TrainJob's runtime (a
ClusterTrainingRuntime or TrainingRuntime, with its own templates) would have to be copied too,
and a plain Pod has no suspended form."""


class KubeconfigError(ValueError):
    """A kubeconfig that names no usable cluster or credentials."""


async def client_from_kubeconfig(kubeconfig: Mapping[str, Any]) -> Kube:
    """A client for the cluster a kubeconfig (as a mapping) names; only inline credentials
    are accepted: a path in it would make the manager read its own files."""
    for section, field in (("clusters", "cluster"), ("users", "user")):
        for entry in kubeconfig.get(section) or ():
            named = entry.get(field) or {}
            paths = sorted(k for k in named if k in ("certificate-authority", "client-certificate",
                                                      "client-key", "tokenFile", "exec",
                                                      "auth-provider"))
            if paths:
                raise KubeconfigError(f"{section}[{entry.get('name')!r}] uses {paths[0]}: "
                                      "only inline credentials (…-data, token) are accepted")
    configuration = client.Configuration()
    try:
        await config.load_kube_config_from_dict(dict(kubeconfig),
                                                client_configuration=configuration)
    except (config.ConfigException, KeyError, TypeError, ValueError) as error:
        raise KubeconfigError(str(error) or type(error).__name__) from None
    return Kube(client.ApiClient(configuration))


@dataclass(frozen=True)
class Health:
    """Whether the worker answered the last probe, and if not, why."""

    reachable: bool
    reason: str
    message: str


class Worker:
    """One worker's client and informers, running until `stop`."""

    def __init__(self, name: str, kube_client: Kube, labels: Mapping[str, str],
                 on_change: Callable[[str, Obj], None],
                 grace: float = DEFAULT_LOST_GRACE_PERIOD) -> None:
        self.name = name
        self.grace = grace
        """Seconds it may not answer before it is lost (`lostGracePeriod`)."""
        self.silent_since: float | None = None
        """When the probes started failing, if they do."""
        self.lost = False
        """Silent for longer than `grace`: the Workloads admitted onto it are requeued, and
        its copies are no longer waited for (they may still run there)."""
        self.returning = False
        """It answers again after it was lost: its nodes are offered once the copies of
        Workloads moved meanwhile are deleted (`Dispatch.settle_workers`)."""
        self.kube = kube_client
        self.labels = {**labels, CLUSTER: name}
        """What every node of the worker carries in the manager's model."""
        self.nodes = Informer(kube_client, kube.NODES, on_change)
        self.pods = Informer(kube_client, kube.PODS, on_change)
        copies = {"labelSelector": COPY_LABEL}
        self.copies = {
            BatchJob.kind: Informer(kube_client, kube.JOBS, on_change, copies),
            JobSet.kind: Informer(kube_client, kube.JOBSETS, on_change, copies, optional=True),
            RayJob.kind: Informer(kube_client, kube.RAYJOBS, on_change, copies, optional=True)}
        """Per copied kind, the copies in the worker; JobSets and RayJobs only where their CRD
        is served."""
        self.copy_index = {kind: LabelIndex(COPY_LABEL) for kind in self.copies}
        for kind, informer in self.copies.items():
            informer.watchers.append(self.copy_index[kind].watcher)
        self.copy_pods = LabelIndex(COPY_LABEL)
        self.pods.watchers.append(self.copy_pods.watcher)
        self.health = Health(False, "Connecting", "not answered yet")
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def informers(self) -> tuple[Informer, ...]:
        return (self.nodes, self.pods, *self.copies.values())

    def start(self) -> None:
        self._tasks = [asyncio.create_task(i.run()) for i in self.informers]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        connection = self.kube  # closing sends no request
        await connection.close()

    async def probe(self) -> Health:
        """Ask the worker for its version (any authenticated client may): it answers; then
        whether the informers have read everything (they cannot while reads are refused)."""
        try:
            response = await self.kube.api.call_api(
                "/version", "GET", auth_settings=["BearerToken"], _preload_content=False,
                _request_timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT))
            async with response:
                if response.status != 200:
                    raise ApiException(status=response.status,
                                       reason=(await response.read()).decode(errors="replace"))
        except ApiException as error:
            reason = "Forbidden" if error.status in (401, 403) else "Unreachable"
            self.health = Health(False, reason, f"{error.status}: {_short(error.reason)}")
        except READ_ERRORS as error:
            self.health = Health(False, "Unreachable", _short(repr(error)))
        else:
            with contextlib.suppress(TimeoutError):  # a worker just connected lists first
                async with asyncio.timeout(PROBE_TIMEOUT):
                    await asyncio.gather(*(i.synced.wait() for i in self.informers))
            synced = all(i.synced.is_set() for i in self.informers)
            self.health = (Health(True, "Connected", "nodes, pods and copies are read")
                           if synced else Health(False, "Syncing", "nodes, pods and jobs not "
                                                 "listed yet (see the controller's log if "
                                                 "this lasts: reads may be refused)"))
        return self.health

    def observed(self, health: Health, now: float) -> None:
        """Record a probe's outcome at `now`: silence that lasts `grace` makes it lost; an
        answer after that makes it returning."""
        if health.reachable:
            self.returning = self.returning or self.lost
            self.silent_since, self.lost = None, False
            return
        if self.silent_since is None:
            self.silent_since = now
        self.lost = now - self.silent_since >= self.grace

    @property
    def offered(self) -> bool:
        """Whether its nodes are offered to the core: only while it answers, so that nothing
        is admitted onto a worker the manager cannot create jobs in, and not while copies
        moved away from it are still being deleted."""
        return self.health.reachable and not self.returning

    def model_nodes(self) -> list[Obj]:
        """Its nodes as the manager's model holds them: labelled with the cluster."""
        return [{**node, "metadata": {**node["metadata"],
                                      "labels": {**(node["metadata"].get("labels") or {}),
                                                 **self.labels}}}
                for node in self.nodes.items()]

    def foreign_usage(self, admitted: Container[str]) -> dict[str, dict[str, int]]:
        """Per node, the requests of the worker's running pods but those of copies whose
        Workload (uid) is `admitted`: those are counted through its admission. A copy whose
        Workload holds no admission (its job deleted on the manager) counts as the worker's
        own until it ends."""
        used: dict[str, dict[str, int]] = {}
        for pod in self.pods.items():
            node = (pod.get("spec") or {}).get("nodeName")
            if (not node or (pod.get("status") or {}).get("phase") in TERMINAL_POD_PHASES
                    or (pod["metadata"].get("labels") or {}).get(COPY_LABEL) in admitted):
                continue
            try:
                requests = pod_requests(pod["spec"])
                amounts = used.setdefault(node, {})
                for resource, amount in requests.items():
                    amounts[resource] = amounts.get(resource, 0) + to_base_units(resource,
                                                                                 amount)
            except (ValueError, KeyError, TypeError) as error:
                log.warning("pod %s/%s in cluster %s not counted: %s",
                            pod["metadata"].get("namespace"), pod["metadata"].get("name"),
                            self.name, error)
        return used

    def serves(self, kind: str) -> bool:
        """Whether copies of `kind` can be made here: a copied kind whose CRD it serves."""
        return kind in self.copies and self.copies[kind].served

    def unserved(self) -> list[str]:
        """The copied kinds whose CRD it does not serve."""
        return [kind for kind in self.copies if not self.serves(kind)]

    def copy_of(self, uid: str) -> Obj | None:
        for kind, index in self.copy_index.items():
            if keys := index.keys.get(uid):
                return self.copies[kind].store.get(next(iter(keys)))
        return None

    def copy_uids(self) -> set[str]:
        """The Workloads (uids) it holds a copy, or a copy's pods, of."""
        return {uid for index in (*self.copy_index.values(), self.copy_pods)
                for uid in index.keys}

    def runs_copy(self, uid: str) -> bool:
        """Whether a copy for the Workload `uid`, or any of its pods, is still here."""
        return (any(index.keys.get(uid) for index in self.copy_index.values())
                or bool(self.copy_pods.keys.get(uid)))


class LabelIndex:
    """The store's keys by the value of one label, kept beside an informer."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.keys: dict[str, set[Key]] = {}
        self.watcher = StoreWatcher(self._changed, self._replaced)

    def _value(self, obj: Obj) -> str | None:
        return (obj["metadata"].get("labels") or {}).get(self.label)

    def _changed(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None and (value := self._value(old)) is not None:
            keys = self.keys.get(value, set())
            keys.discard(key_of(old))
            if not keys:
                self.keys.pop(value, None)
        if new is not None and (value := self._value(new)) is not None:
            self.keys.setdefault(value, set()).add(key_of(new))

    def _replaced(self, objects: Iterable[Obj]) -> None:
        self.keys = {}
        for obj in objects:
            self._changed(None, obj)


def _short(text: str | None, limit: int = kube.QUOTED_REASON_LIMIT) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit] + "…"

