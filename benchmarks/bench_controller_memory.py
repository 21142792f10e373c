"""The controller's resident memory with a large backlog, offline: what one waiting job costs.

Run: `.venv/bin/python benchmarks/bench_controller_memory.py [--pending 100000] [--nodes 10000]
[--queues 1000] [--breakdown]`

A full cluster is built the way a controller meets it: `--nodes` 8-GPU nodes, `--queues`
ClusterQueues (in cohorts of ten under one root) whose quotas add up to the cluster, one 8-GPU
Job per node admitted by the controller's own passes and a running pod for each on the node it
was hinted to. Then `--pending` 8-GPU Jobs arrive with their Workloads, as a restarted
controller lists them, and one pass decides on them all. The objects are shaped as the API
server returns them (metadata with managedFields, defaulted pod templates, node status), since
that, not the core's model, is most of what a controller holds.

The informer caches are filled directly (no API server; tests/controller/fake_api.py answers
the pass's writes). The fake API server holds the very objects the caches hold (what a write
changes is shared again after each pass, and the Events written are dropped with the log of
writes), so the figures are the controller's own. Memory is the process's resident set
(Linux), read after a full garbage collection; the peak is the kernel's high-water mark. The
cost of one waiting job is the rise in resident memory from filling the backlog, divided by
its size. `--breakdown` then adds up the Python objects each part holds, each object counted
once, in the table's order: where the memory goes.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import resource
import subprocess
import sys
import time
import types
from collections.abc import Callable
from typing import Any

from common import ROOT, machine
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(ROOT / "tests" / "controller"))

from fake_api import CREATED, FakeApi, reconciler, settled_pass

from admitter.controller.reconciler import Reconciler
from admitter.core.model import GPU
from admitter.jobs.registry import KINDS
from admitter.jobs.workloads import job_contract, workload_for
from admitter.kube import client as kube
from admitter.kube import informer as informer_module
from admitter.kube.client import decode
from admitter.kube.informer import Informer, key_of
from admitter.kube.objects import Obj

from builders.kube import JobWrapper, cluster_queue, local_queue

COHORT = 10
"""ClusterQueues per cohort (Kueue's large-scale shape groups its queues in tens... of tens)."""
NODE_GPUS = 8


DECODER: list[Callable[[bytes], Any]] = [decode]
"""How cached objects are decoded in this run: the client's decoder, or json.loads (--plain)."""


def plain_caches() -> None:
    """Caches as a client keeps them that decodes with json.loads and keeps every field: what
    the decoder, `lean` and the informers' projections (`Informer.keep`) are compared with."""
    DECODER[0] = json.loads
    informer_module.lean = lambda obj: obj


def plain_informers(controller: Reconciler) -> None:
    """The controller's informers keeping each object as it comes, in a --plain run."""
    if DECODER[0] is json.loads:
        for informer in controller.caches.all():
            informer.keep = None


def resident_mb() -> float:
    """Resident memory now, after a full collection."""
    gc.collect()
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def managed_fields(manager: str, operation: str, fields: Obj) -> Obj:
    return {"manager": manager, "operation": operation, "apiVersion": "v1",
            "time": CREATED, "fieldsType": "FieldsV1", "fieldsV1": fields}


def as_served_node(name: str, zone: str) -> Obj:
    """A GPU node as the API server serves it: labels, capacity, conditions, node info."""
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "gpu-8x",
              "topology.kubernetes.io/zone": zone, "nvidia.com/gpu.product": "H100-SXM",
              "nvidia.com/gpu.count": str(NODE_GPUS)}
    amounts = {"cpu": "192", "memory": "2113411Mi", "ephemeral-storage": "3519Gi",
               "pods": "110", GPU: str(NODE_GPUS)}
    conditions = [{"type": kind, "status": status, "reason": f"Kubelet{kind}",
                   "message": f"kubelet reports {kind}", "lastHeartbeatTime": CREATED,
                   "lastTransitionTime": CREATED}
                  for kind, status in (("MemoryPressure", "False"), ("DiskPressure", "False"),
                                       ("PIDPressure", "False"), ("Ready", "True"))]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1",
                     "creationTimestamp": CREATED, "labels": labels,
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
                     "managedFields": [managed_fields("kubelet", "Update",
                                                      {"f:metadata": {"f:labels": {
                                                          f"f:{k}": {} for k in labels}}}),
                                       managed_fields("kubelet", "Update", {"f:status": {
                                           "f:conditions": {}, "f:allocatable": {}}})]},
        "spec": {"providerID": f"gce://fleet/{zone}/{name}"},
        "status": {"capacity": amounts, "allocatable": dict(amounts), "conditions": conditions,
                   "addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                                 {"type": "Hostname", "address": name}],
                   "nodeInfo": {"kernelVersion": "6.8.0", "osImage": "Ubuntu 24.04",
                                "containerRuntimeVersion": "containerd://2.0.0",
                                "kubeletVersion": "v1.34.4", "architecture": "amd64",
                                "operatingSystem": "linux", "machineID": name,
                                "systemUUID": name, "bootID": name}},
    }


def as_served_job(name: str, namespace: str, queue: str, number: int) -> Obj:
    """An 8-GPU Job as the API server returns it: defaulted, labelled, with managedFields."""
    job = JobWrapper(name, namespace).queue(queue).gpus(NODE_GPUS).obj()
    uid = f"uid-{namespace}-{name}"
    meta = job["metadata"]
    meta.update(uid=uid, resourceVersion=str(number), creationTimestamp=CREATED, generation=1)
    meta["managedFields"] = [
        managed_fields("kubectl-client-side-apply", "Update",
                       {"f:metadata": {"f:labels": {}, "f:annotations": {}},
                        "f:spec": {"f:template": {"f:spec": {"f:containers": {}}}}}),
        managed_fields("admitter", "Update", {"f:spec": {"f:suspend": {}}}),
    ]
    selector = {"batch.kubernetes.io/controller-uid": uid}
    spec = job["spec"]
    spec.update(selector={"matchLabels": selector}, completionMode="NonIndexed",
                podReplacementPolicy="TerminatingOrFailed", manualSelector=False)
    template = spec["template"]
    template["metadata"]["labels"] = {**selector, "batch.kubernetes.io/job-name": name,
                                      "controller-uid": uid, "job-name": name}
    pod = template["spec"]
    pod.update(dnsPolicy="ClusterFirst", schedulerName="default-scheduler",
               securityContext={}, terminationGracePeriodSeconds=30)
    container = pod["containers"][0]
    container.update(command=["torchrun", "--nproc-per-node=8", "train.py"],
                     args=["--config", f"configs/{name}.yaml"],
                     env=[{"name": "NCCL_DEBUG", "value": "WARN"}],
                     terminationMessagePath="/dev/termination-log",
                     terminationMessagePolicy="File", imagePullPolicy="IfNotPresent")
    job["status"] = {}
    return job


def as_served_workload(job: Obj, number: int) -> Obj:
    """The Workload the controller keeps for `job`, as listed back (uid, version, time)."""
    contract = job_contract(job, max_min_runtime=7 * 86400, topology_levels=None)
    workload = workload_for(job, contract, 0, KINDS)
    meta = workload["metadata"]
    meta.update(uid=f"wl-{meta['name']}", resourceVersion=str(number),
                creationTimestamp=CREATED, generation=1)
    meta["managedFields"] = [managed_fields("admitter", "Update",
                                            {"f:spec": {}, "f:metadata": {}})]
    return workload


def running_pod(job: Obj, node: str) -> Obj:
    """The one pod of an admitted Job, running on `node`."""
    meta = job["metadata"]
    template = copy.deepcopy(job["spec"]["template"])
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{meta['name']}-0", "namespace": meta["namespace"],
                         "uid": f"pod-{meta['uid']}", "resourceVersion": "1",
                         "creationTimestamp": CREATED, "labels": template["metadata"]["labels"],
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": meta["name"], "uid": meta["uid"],
                                              "controller": True}]},
            "spec": {**template["spec"], "nodeName": node},
            "status": {"phase": "Running", "startTime": CREATED}}


class SharedApi(FakeApi):
    """The fake API server, holding the objects the caches hold where they are the same
    version (`share`): its own copies are not the controller's memory."""

    def _stamp(self, obj: Obj) -> Obj:
        # a new version gets metadata of its own: the one it was patched from may be cached
        obj["metadata"] = dict(obj["metadata"])
        return super()._stamp(obj)

    def share(self, informers: list[Informer]) -> None:
        """Hold each cached object in place of the same version of it, and forget Events."""
        for informer in informers:
            for (namespace, name), obj in informer.store.items():
                path = informer.kind.path(namespace or None, name)
                held = self.objects.get(path)
                if held is not None and (held["metadata"].get("resourceVersion")
                                         == obj["metadata"].get("resourceVersion")):
                    self.objects[path] = obj
        self.objects = {path: obj for path, obj in self.objects.items()
                        if "/events/" not in path}


def store(api: FakeApi, informer: Informer, kind: kube.Kind, obj: Obj) -> None:
    """Into the cache as a watch event delivers it (decoded from its own JSON by the client's
    decoder), and into the fake API server: the object the cache keeps, shared by both
    (counted once)."""
    served = DECODER[0](json.dumps(obj).encode())
    meta = served["metadata"]
    informer.observe(served)
    api.objects[kind.path(meta.get("namespace"), meta["name"])] = informer.store[key_of(served)]


async def settled(api: SharedApi, controller: Reconciler) -> None:
    """One pass and its writes, the fake API's log of them then dropped and its copies shared
    with the caches (not the controller's memory)."""
    await settled_pass(controller)
    api.writes.clear()
    api.share(controller.caches.all())


async def measure(pending: int, nodes: int, queues: int) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    start_mb = resident_mb()
    api = SharedApi()
    controller = reconciler(api)
    plain_informers(controller)
    caches = controller.caches
    for n in range(nodes):
        store(api, caches.nodes, kube.NODES, as_served_node(f"node-{n}", f"zone-{n % 4}"))
    quota = nodes * NODE_GPUS // queues
    store(api, caches.cluster_queues, kube.CLUSTER_QUEUES, cluster_queue("fleet", quota * queues))
    for c in range((queues + COHORT - 1) // COHORT):
        store(api, caches.cluster_queues, kube.CLUSTER_QUEUES,
              cluster_queue(f"cohort-{c}", quota * COHORT, parent="fleet"))
    for q in range(queues):
        store(api, caches.cluster_queues, kube.CLUSTER_QUEUES,
              cluster_queue(f"team-{q}", quota, parent=f"cohort-{q // COHORT}"))
        store(api, caches.local_queues, kube.LOCAL_QUEUES,
              local_queue(f"team-{q}", namespace=f"ns-{q}"))
    rows.append((f"{nodes:,} nodes, {queues:,} queues", f"{resident_mb() - start_mb:,.0f}"))

    jobs = caches.jobs["Job"]
    number = 1000
    for n in range(nodes):
        number += 1
        store(api, jobs, kube.JOBS, as_served_job(f"run-{n}", f"ns-{n % queues}",
                                                  "default", number))
    began = time.process_time()
    passes = 0
    while passes < 20:
        await settled(api, controller)
        passes += 1
        admitted = _hinted_nodes(api)
        if len(admitted) == nodes:
            break
    for (namespace, name), node in _hinted_nodes(api).items():
        job = as_served_job(name, namespace, "default", 0)  # the cache keeps part of it
        store(api, caches.pods, kube.PODS, running_pod(job, node))
    await settled(api, controller)
    rows.append((f"{len(admitted):,} running Jobs with their Workloads and pods "
                 f"({passes} passes, {time.process_time() - began:.1f} s CPU)",
                 f"{resident_mb() - start_mb:,.0f}"))

    before_backlog = resident_mb()
    for p in range(pending):
        number += 1
        job = as_served_job(f"wait-{p}", f"ns-{p % queues}", "default", number)
        store(api, jobs, kube.JOBS, job)
        store(api, caches.workloads, kube.WORKLOADS, as_served_workload(job, number))
    backlog_mb = resident_mb() - before_backlog
    rows.append((f"+ {pending:,} waiting Jobs and their Workloads, cached",
                 f"{resident_mb() - start_mb:,.0f}"))
    began = time.process_time()
    await settled(api, controller)
    rows.append((f"after one pass over them ({time.process_time() - began:.1f} s CPU)",
                 f"{resident_mb() - start_mb:,.0f}"))
    rows.append(("process peak resident (whole run, interpreter included)", f"{peak_mb():,.0f}"))
    rows.append(("one waiting Job with its Workload, cached",
                 f"{backlog_mb * 1024 / pending:.1f} KB"))
    if BREAKDOWN:
        rows += breakdown(api, controller)
    return rows


BREAKDOWN: list[bool] = []
"""Set by --breakdown."""
NOT_HELD = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
            types.CodeType, types.MethodType)
"""What the breakdown does not follow: the program itself, not what it holds."""


def breakdown(api: FakeApi, controller: Reconciler) -> list[tuple[str, str]]:
    """MB of Python objects reachable from each part and from none before it (strings the
    decoder shares are counted with the first part that holds them)."""
    seen: set[int] = set()
    caches = controller.caches
    parts: list[tuple[str, object]] = [
        *((f"  {name} cache ({len(informer.store):,})", informer.store) for name, informer in
          (("Job", caches.jobs["Job"]), ("Workload", caches.workloads), ("Pod", caches.pods),
           ("Node", caches.nodes))),
        ("  the other caches, their indexes, the core's kept state, metrics", controller),
        ("  the fake API server's own copies", api.objects)]
    rows = []
    for name, root in parts:
        total, stack = 0, [root]
        while stack:
            obj = stack.pop()
            if id(obj) in seen or isinstance(obj, NOT_HELD):
                continue
            seen.add(id(obj))
            total += sys.getsizeof(obj)
            stack.extend(gc.get_referents(obj))
        rows.append((name, f"{total / 2**20:,.0f}"))
    return [("Python objects held, MB (--breakdown):", ""), *rows]


def _hinted_nodes(api: FakeApi) -> dict[tuple[str, str], str]:
    """Admitted Workloads' Jobs → the node their one pod was hinted to."""
    found = {}
    for path, workload in api.objects.items():
        if "/workloads/" not in path:
            continue
        admission = (workload.get("status") or {}).get("admission")
        if admission:
            [hint] = admission["nodeHints"]
            owner = workload["metadata"]["ownerReferences"][0]["name"]
            found[workload["metadata"]["namespace"], owner] = hint["node"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--queues", type=int, default=1_000)
    parser.add_argument("--breakdown", action="store_true",
                        help="add up the Python objects each part holds (after the peak)")
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.breakdown:
        BREAKDOWN.append(True)
    if args.plain:  # the comparison, run in a process of its own by the run without it
        plain_caches()
        print(json.dumps(asyncio.run(measure(args.pending, args.nodes, args.queues))))
        return
    title = f"controller resident memory, MB above the bare process ({machine()})"
    rows = asyncio.run(measure(args.pending, args.nodes, args.queues))
    plain = json.loads(subprocess.run(
        [sys.executable, __file__, "--plain", *(["--breakdown"] if args.breakdown else []),
         f"--pending={args.pending}",
         f"--nodes={args.nodes}", f"--queues={args.queues}"],
        check=True, capture_output=True, text=True).stdout)
    table = Table(title=title)
    table.add_column("held")
    table.add_column("admitter's caches", justify="right")
    table.add_column("json.loads, every field", justify="right")
    for (held, lean_mb), (_, plain_mb) in zip(rows, plain, strict=True):
        table.add_row(held, lean_mb, plain_mb)
    Console().print(table)


if __name__ == "__main__":
    main()
