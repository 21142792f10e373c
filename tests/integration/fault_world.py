"""Fault injection on the real control plane, shared by the fault tests: `admitter run`
replicas each behind its own relay (so one replica's path can be cut), the Lease's holder,
and the safety invariants that must hold at every moment whatever fails."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from pathlib import Path

import yaml
from admitter_world import ControllerProcess, jobs, running, workloads
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.quantity import kube_base_units
from admitter.kube import client as kube
from admitter.kube.client import Kind, Kube
from admitter.kube.objects import TERMINAL_POD_PHASES, Obj, is_true
from admitter.testing import GPU_RESOURCE, LocalCluster
from admitter.testing.partition import PartitionableRelay

NODE_GPUS = 8
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
FAULTS_LEASE = "faults"
LEADER_FENCE = Path(__file__).parents[2] / "deploy" / "leader-fence.yaml"
POLICIES = Kind("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", False)
POLICY_BINDINGS = Kind("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings",
                       False)


@contextlib.asynccontextmanager
async def leader_fence(api: Kube, namespace: str, lease: str) -> AsyncIterator[None]:
    """deploy/leader-fence.yaml's policy, bound to the test's own Lease for the block: the
    API server refuses admissions written in a term of that Lease that is over."""
    policy, binding = yaml.safe_load_all(LEADER_FENCE.read_text())
    try:
        await api.create(POLICIES, policy)
    except ApiException as error:
        if not kube.is_conflict(error):
            raise
        current = await api.get(POLICIES, policy["metadata"]["name"])
        await api.replace(POLICIES, {**policy, "metadata": current["metadata"]})
    name = f"{binding['metadata']['name']}-{namespace}"
    spec = binding["spec"]
    await api.create(POLICY_BINDINGS, {**binding, "metadata": {"name": name}, "spec": {
        **spec, "paramRef": {**spec["paramRef"], "name": lease, "namespace": namespace}}})
    try:
        yield
    finally:
        await api.delete(POLICY_BINDINGS, name)


class Replicas:
    """The controller replicas, each behind its own relay to the API server."""

    def __init__(self, cluster: LocalCluster, namespace: str, logs: Path,
                 lease_seconds: int) -> None:
        self.cluster, self.namespace, self.logs = cluster, namespace, logs
        self.lease_seconds = lease_seconds
        self.processes: dict[str, ControllerProcess] = {}
        self.relays: dict[str, PartitionableRelay] = {}
        self.killed: set[str] = set()

    def start(self, identity: str) -> None:
        relay = self.relays[identity] = PartitionableRelay(self.cluster.api_port).start()
        config = relay.kubeconfig(self.cluster.kubeconfig_path, self.logs / f"{identity}.kcfg")
        self.processes[identity] = ControllerProcess(
            config, self.logs / f"{identity}.log", "--leader-elect", "--identity", identity,
            "--lease-namespace", self.namespace, "--lease-name", FAULTS_LEASE,
            "--lease-duration", str(self.lease_seconds))

    def kill(self, identity: str) -> None:
        self.processes[identity].kill()
        self.killed.add(identity)

    def freeze(self, identity: str, frozen: bool) -> None:
        """SIGSTOP (or SIGCONT) a replica: a process stalled by its node, not ended."""
        process = self.processes[identity].process
        process.send_signal(signal.SIGSTOP if frozen else signal.SIGCONT)

    def exited(self) -> list[str]:
        return [name for name, process in self.processes.items()
                if name not in self.killed and not process.alive()]

    def stop(self) -> None:
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                process.process.send_signal(signal.SIGCONT)
            process.kill()
        for relay in self.relays.values():
            relay.close()


@contextlib.contextmanager
def restored(cluster: LocalCluster) -> Iterator[None]:
    """Whatever a failed test left paused runs again: the session's later tests need it."""
    try:
        yield
    finally:
        for name in ("etcd", "kube-apiserver"):
            cluster.resume(name)


@contextlib.asynccontextmanager
async def two_replicas(api: Kube, cluster: LocalCluster, namespace: str, logs: Path,
                       lease_seconds: int) -> AsyncIterator[Replicas]:
    """Two replicas electing a leader for the block, fenced as deploy/ fences them; whatever
    was paused runs again after."""
    started = Replicas(cluster, namespace, logs, lease_seconds)
    async with leader_fence(api, namespace, FAULTS_LEASE):
        with restored(cluster):
            try:
                for identity in ("replica-0", "replica-1"):
                    started.start(identity)
                yield started
            finally:
                started.stop()


async def leader(api: Kube, namespace: str) -> str | None:
    try:
        lease = await api.get(kube.LEASES, FAULTS_LEASE, namespace)
    except ApiException as error:
        if kube.is_not_found(error):
            return None  # no replica took it yet
        raise
    holder: str | None = (lease.get("spec") or {}).get("holderIdentity")
    return holder


def pod_set_gpus(pod_set: Obj) -> int:
    return int(pod_set["count"]) * kube_base_units(
        GPU_RESOURCE, (pod_set.get("requests") or {}).get(GPU_RESOURCE, 0))


def holds_admission(wl: Obj) -> bool:
    return bool((wl.get("status") or {}).get("admission"))


def held_gpus(listed: Iterable[Obj]) -> int:
    """GPUs of the Workloads that hold an admission."""
    return sum(pod_set_gpus(p) for w in listed if holds_admission(w)
               for p in w["spec"]["podSets"])


def owner_uid(wl: Obj) -> str | None:
    return next((o.get("uid") for o in wl["metadata"].get("ownerReferences", [])), None)


def pod_gpus(pod: Obj) -> int:
    return sum(kube_base_units(GPU_RESOURCE, c.get("resources", {}).get("limits", {}).get(
        GPU_RESOURCE, 0)) for c in pod["spec"]["containers"])


async def safety_problems(api: Kube, namespace: str,
                          queue_limits: dict[str, int]) -> list[str]:
    """The invariants that must hold at every moment, `queue_limits` (ClusterQueue → GPUs,
    "" for the namespace's whole share) included. Jobs are listed between two lists of
    Workloads: a Job started after the first list was admitted before the second, one being
    evicted was still admitted in the first."""
    before = await workloads(api, namespace)
    current = await jobs(api, namespace)
    after = await workloads(api, namespace)
    every_pod = (await api.list(kube.PODS))["items"]
    problems = []
    admitted = {owner_uid(w) for w in before + after if holds_admission(w)}
    for name, job in current.items():
        if running(job) and not is_true(job, "Complete") and job["metadata"][
                "uid"] not in admitted:
            problems.append(f"Job {name} runs without an admitted Workload")
    for listed in (before, after):
        for queue, limit in queue_limits.items():
            held = held_gpus(w for w in listed if queue in (
                "", ((w.get("status") or {}).get("admission") or {}).get("clusterQueue")))
            if held > limit:
                problems.append(f"queue {queue or '(all)'} holds {held} GPUs of {limit}")
    per_node: dict[str, int] = {}
    for pod in every_pod:
        node = pod["spec"].get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in TERMINAL_POD_PHASES:
            per_node[node] = per_node.get(node, 0) + pod_gpus(pod)
    problems += [f"node {n} runs {g} GPUs of {NODE_GPUS}" for n, g in per_node.items()
                 if g > NODE_GPUS]
    evictions = {owner_uid(w): int((w.get("status") or {}).get("evictionCount", 0))
                 for w in after}
    ours = [p for p in every_pod if p["metadata"]["namespace"] == namespace]
    for name, job in current.items():
        created = [p for p in ours if p["metadata"].get("labels", {}).get(JOB_NAME_LABEL) == name]
        allowed = 1 + evictions.get(job["metadata"]["uid"], 0)
        if len(created) > allowed:
            problems.append(f"Job {name} started {len(created)} times ({allowed} allowed)")
    return problems


async def during(seconds: float, check: Callable[[], Awaitable[None]],
                 every: float = 0.5) -> None:
    """Run `check` (which asserts) every `every` seconds for `seconds` while a fault lasts;
    a check the API server does not answer is skipped."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        with contextlib.suppress(*kube.CONNECTION_ERRORS):
            await asyncio.wait_for(check(), timeout=5)
        await asyncio.sleep(every)
