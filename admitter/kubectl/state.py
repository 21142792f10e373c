"""What the plugin reads: the queues and Workloads as the controller wrote them, read once
with the caller's credentials."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.duration import parse_duration
from admitter.api.workload import CONDITION_FINISHED, CONDITION_QUOTA_RESERVED
from admitter.core.model import GPU, Workload
from admitter.core.queue_order import workload_key
from admitter.jobs.registry import SUSPENDABLE
from admitter.jobs.workloads import JOB_NAME_LABEL, job_owner, resource_of
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.core_values import core_workload
from admitter.kube.objects import Obj, condition, is_true, parse_time

FORBIDDEN = 403
CLUSTER_QUEUE_VIEWER = "admitter-clusterqueue-viewer"
"""The ClusterRole that lets a person read ClusterQueues and their status cluster-wide (what
`queues` shows and `explain` ranks by); a namespace's `view`, `edit` or `admin` does not."""
QUEUE_VIEWER = "admitter-queue-viewer"
"""The ClusterRole that reads LocalQueues and Workloads (aggregated into `view`, `edit` and
`admin` in a namespace); bound with a ClusterRoleBinding, in every namespace."""


@dataclass(frozen=True)
class Unread:
    """Something the plugin could not read with the caller's credentials, and the role that
    would grant it."""

    what: str
    grant: str

    def __str__(self) -> str:
        return f"could not read {self.what} (forbidden); {self.grant}"


CLUSTER_QUEUES_UNREAD = Unread(
    "ClusterQueues at cluster scope",
    f"a ClusterRoleBinding to the ClusterRole {CLUSTER_QUEUE_VIEWER} grants it")

WORKER_CLUSTERS_UNREAD = Unread(
    "WorkerClusters (the fleet's clusters)",
    f"a ClusterRoleBinding to the ClusterRole {CLUSTER_QUEUE_VIEWER} grants it")


async def connect(kubeconfig: str | None, context: str | None) -> tuple[Kube, str]:
    """A client from the caller's kubeconfig ($KUBECONFIG or ~/.kube/config unless given) and
    the namespace its context names ("default" if none)."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, context=context,
                                  client_configuration=configuration)
    contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    chosen = next((c for c in contexts if c["name"] == context), active) if context else active
    namespace = ((chosen or {}).get("context") or {}).get("namespace") or "default"
    return Kube(client.ApiClient(configuration)), namespace


@dataclass
class QueueReading:
    """One reading of every ClusterQueue, LocalQueue and Workload the caller may see, at
    `now` (seconds since the epoch)."""

    now: float
    cluster_queues: dict[str, Obj]
    local_queues: dict[tuple[str, str], Obj]
    workloads: list[Obj]
    unread: list[Unread] = field(default_factory=list)
    """What the caller may not read: answers leave it out and say so."""
    worker_clusters: dict[str, Obj] = field(default_factory=dict)
    """The fleet's WorkerClusters by name; none outside a fleet."""
    children: dict[str | None, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, cq in sorted(self.cluster_queues.items()):
            parent = (cq.get("spec") or {}).get("parent")
            self.children.setdefault(parent if parent in self.cluster_queues else None,
                                     []).append(name)

    def cluster_queue_of(self, wl: Obj) -> str:
        """The ClusterQueue the Workload's LocalQueue points at ("" if none)."""
        status = wl.get("status") or {}
        if status.get("admission"):
            return str(status["admission"]["clusterQueue"])
        lq = self.local_queues.get((wl["metadata"]["namespace"], wl["spec"]["queueName"]))
        return str(((lq or {}).get("spec") or {}).get("clusterQueue") or "")

    def core(self, wl: Obj) -> Workload:
        """The Workload as the decision core sees it."""
        return core_workload(wl, self.cluster_queue_of(wl), pods_ready=False)

    def pending(self) -> list[Obj]:
        return [wl for wl in self.workloads if phase(wl) == "Pending"]

    def admitted(self) -> list[Obj]:
        return [wl for wl in self.workloads if phase(wl) == "Admitted"]

    def queue_order(self, cluster_queue: str) -> list[Obj]:
        """The Workloads waiting in a ClusterQueue, in the order the core tries them."""
        waiting = [(self.core(wl), wl) for wl in self.pending()
                   if self.cluster_queue_of(wl) == cluster_queue]
        return [wl for _, wl in sorted(waiting, key=lambda item: workload_key(item[0]))]

    def leaf_order(self) -> list[str]:
        """Leaf ClusterQueues in the order they are offered capacity: compared level by level
        down the tree by the rank the controller wrote among siblings."""
        leaves: list[str] = []

        def visit(parent: str | None) -> None:
            for name in sorted(self.children.get(parent, []), key=self._rank_key):
                if name in self.children:
                    visit(name)
                else:
                    leaves.append(name)

        visit(None)
        return leaves

    def _rank_key(self, name: str) -> tuple[int, str]:
        rank = int((self.cluster_queues[name].get("status") or {}).get("rank") or 0)
        return rank, name

    def subtree(self, name: str) -> Iterable[str]:
        yield name
        for child in self.children.get(name, []):
            yield from self.subtree(child)


async def read_state(client: Kube, namespace: str | None = None) -> QueueReading:
    """Everything the caller may read: objects of every namespace, or, where their RBAC
    forbids that, of `namespace` only (then positions count only what they can see); no
    ClusterQueues if they may not read those. `unread` says what was left out."""
    unread: list[Unread] = []
    cluster_queues = {cq["metadata"]["name"]: cq for cq in await _readable(
        client, kube.CLUSTER_QUEUES, None, unread)}
    local_queues = {(lq["metadata"]["namespace"], lq["metadata"]["name"]): lq
                    for lq in await _readable(client, kube.LOCAL_QUEUES, namespace, unread)}
    workloads = await _readable(client, kube.WORKLOADS, namespace, unread)
    workers = {wc["metadata"]["name"]: wc for wc in await _worker_clusters(client, unread)}
    return QueueReading(time.time(), cluster_queues, local_queues, workloads, unread, workers)


async def _worker_clusters(client: Kube, unread: list[Unread]) -> list[Obj]:
    """The WorkerClusters; none where their CRD is not installed, or where the caller may not
    read them (noted in `unread` unless ClusterQueues are, which the same role grants)."""
    try:
        items: list[Obj] = (await client.list(kube.WORKER_CLUSTERS))["items"]
        return items
    except ApiException as error:
        if error.status == FORBIDDEN:
            if CLUSTER_QUEUES_UNREAD not in unread:
                unread.append(WORKER_CLUSTERS_UNREAD)
            return []
        if kube.is_not_found(error):
            return []
        raise


async def _readable(client: Kube, kind: kube.Kind, namespace: str | None,
                    unread: list[Unread]) -> list[Obj]:
    """Every object of `kind`; where that is forbidden, those of `namespace` (none for a
    cluster-scoped kind or no namespace), noting in `unread` what was left out."""
    try:
        items: list[Obj] = (await client.list(kind))["items"]
        return items
    except ApiException as error:
        if error.status != FORBIDDEN:
            raise
    if kind is kube.CLUSTER_QUEUES:
        unread.append(CLUSTER_QUEUES_UNREAD)
        return []
    what = "LocalQueues" if kind is kube.LOCAL_QUEUES else "Workloads"
    shown = "" if namespace is None else f", only those of namespace {namespace} are shown"
    unread.append(Unread(f"{what} of every namespace{shown}",
                         f"a ClusterRoleBinding to the ClusterRole {QUEUE_VIEWER} grants it"))
    if namespace is None or not kind.namespaced:
        return []
    listed = await client.request("GET", kind.path(namespace))
    return list(listed.get("items") or [])


def phase(wl: Obj) -> str:
    """Finished, Admitted or Pending, as the conditions and admission say."""
    if is_true(wl, CONDITION_FINISHED):
        return "Finished"
    if (wl.get("status") or {}).get("admission"):
        return "Admitted"
    return "Pending"


def gpus(wl: Obj) -> int:
    """GPUs the whole gang requests."""
    total = 0
    for pod_set in wl["spec"]["podSets"]:
        total += int(float(pod_set.get("requests", {}).get(GPU, 0))) * int(pod_set["count"])
    return total


def waiting_reason(wl: Obj) -> tuple[str, str]:
    """The reason and message of its QuotaReserved=False condition."""
    found = condition(wl, CONDITION_QUOTA_RESERVED) or {}
    if found.get("status") != "False":
        return "", ""
    return str(found.get("reason") or ""), str(found.get("message") or "")


def job_name(wl: Obj) -> str:
    owner = job_owner(wl)
    if owner is not None:
        return str(owner["name"])
    return str((wl["metadata"].get("labels") or {}).get(JOB_NAME_LABEL, ""))


def job_kind(wl: Obj) -> str:
    """The kind of the job the Workload was made for (`Job`, `JobSet`); `job` when its owner
    is gone."""
    owner = job_owner(wl)
    return str(owner["kind"]) if owner is not None else "job"


def protected_until(wl: Obj) -> float | None:
    """When an admitted Workload's min-runtime protection ends (None: unfunded or waiting)."""
    admission = (wl.get("status") or {}).get("admission")
    if not admission:
        return None
    min_runtime = parse_duration(wl["spec"].get("minRuntime", 0))
    admitted = parse_time(admission.get("admittedAt"))
    return None if admitted is None or min_runtime <= 0 else admitted + min_runtime


class Ambiguous(Exception):
    """A name given with -A that names jobs or Workloads in more than one namespace."""


async def find_workload(client: Kube, state: QueueReading, namespace: str | None,
                        name: str) -> Obj | None:
    """The Workload named `name`, or the one made for the job (of any queued kind) named
    `name`, in `namespace`; with None (-A), in whichever namespace the caller may read has
    one, `Ambiguous` if several do."""
    if namespace is None:
        return _across_namespaces(state, name)
    for wl in state.workloads:
        if wl["metadata"]["namespace"] == namespace and wl["metadata"]["name"] == name:
            return wl
    for job_kind in SUSPENDABLE.values():
        try:
            job = await client.get(resource_of(job_kind), name, namespace)
        except ApiException as error:
            if kube.is_not_found(error) or error.status == 403:
                continue  # not of this kind, its CRD missing, or not readable by the user
            raise
        uid = job["metadata"].get("uid")
        for wl in state.workloads:
            owner = job_owner(wl)
            if wl["metadata"]["namespace"] == namespace and owner and owner.get("uid") == uid:
                return wl
    return None


def _across_namespaces(state: QueueReading, name: str) -> Obj | None:
    """The Workload named `name`, or made for a job named `name`, in any namespace read; of
    several in one namespace (a job made again under the same name), the newest not
    finished."""
    found: dict[str, list[Obj]] = {}
    for wl in state.workloads:
        if name in (wl["metadata"]["name"], job_name(wl)):
            found.setdefault(wl["metadata"]["namespace"], []).append(wl)
    if len(found) > 1:
        raise Ambiguous(f'Error: "{name}" names a Job or Workload in several namespaces '
                        f"({', '.join(sorted(found))}): give one with -n")
    for candidates in found.values():
        return max(candidates, key=lambda wl: (phase(wl) != "Finished",
                                               wl["metadata"].get("creationTimestamp", "")))
    return None
