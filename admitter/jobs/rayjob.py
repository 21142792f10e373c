"""RayJob (KubeRay, `ray.io/v1`): the Ray cluster it makes is its pod sets, the head group
(one pod) and each worker group, admitted as one gang and suspended through `spec.suspend`
(KubeRay deletes the RayCluster of a suspended RayJob and makes it anew from the RayJob's
spec on unsuspend, so the templates may be pinned while it is suspended).

A worker group counts the pods KubeRay starts it with: `replicas` held inside
[`minReplicas`, `maxReplicas`] (`maxReplicas` when the two contradict), times `numOfHosts`,
exactly as KubeRay's RayCluster controller sizes it. Not `maxReplicas`: it defaults to 2^31-1
and would ask quota for pods that never run; growth beyond the start size is the autoscaler's
business, which a queued RayJob should not use (it would outgrow its admission).

The submitter pod KubeRay adds in `K8sJobMode` (a small CPU-only Job that runs
`ray job submit` once the cluster is up) is not a pod set here.

KubeRay labels the Ray pods only with the generated RayCluster's name (`ray.io/cluster`), and
they are owned by that RayCluster, not by the RayJob. So admitter labels the head and worker
templates with the RayJob's name (`POD_LABEL`) in the same patch that starts it; KubeRay copies
template labels onto every pod it makes, so the running pods name their RayJob directly, as a
JobSet's do. The label goes again when the RayJob is restored after an eviction."""

from __future__ import annotations

import json
from typing import Any

from admitter.jobs.interface import PodSetInfo, dotted
from admitter.jobs.templated import TemplatedJob
from admitter.kube.objects import Obj

HEAD_POD_SET = "head"
CLUSTER = ("spec", "rayClusterSpec")
SUCCEEDED = "SUCCEEDED"
FAILED_DEPLOYMENTS = frozenset({"Failed", "ValidationFailed"})
POD_LABEL = "admitter.dev/rayjob-name"
"""Put on a started RayJob's head and worker templates: its pods name the RayJob."""


def _count(group: Obj, field: str, default: int) -> int:
    value = group.get(field, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"workerGroupSpecs[{group.get('groupName')}].{field} must be a "
                         f"whole number of at least 0, not {value!r}")
    return value


def worker_pods(group: Obj) -> int:
    """Pods KubeRay starts for a worker group (its `GetWorkerGroupDesiredReplicas`)."""
    if group.get("suspend"):
        return 0
    low = _count(group, "minReplicas", 0)
    high = _count(group, "maxReplicas", 2**31 - 1)
    wanted = _count(group, "replicas", 0)
    replicas = high if low > high else min(max(wanted, low), high)
    hosts = _count(group, "numOfHosts", 1) or 1
    return replicas * hosts


class RayJob(TemplatedJob):
    api_version = "ray.io/v1"
    kind = "RayJob"
    workload_prefix = "rayjob"
    plural = "rayjobs"
    name_label = False
    pod_label = POD_LABEL

    def pod_set_shapes(self, obj: Obj) -> list[tuple[str, int, tuple[str, ...]]]:
        cluster: Any = obj["spec"].get("rayClusterSpec")
        if not isinstance(cluster, dict):
            raise ValueError("spec.rayClusterSpec is required to queue a RayJob (a RayJob "
                             f"that selects an existing cluster is not queued), not {cluster!r}")
        head: tuple[str, ...] = (*CLUSTER, "headGroupSpec", "template", "spec")
        shapes = [(HEAD_POD_SET, 1, head)]
        for index, group in enumerate(cluster.get("workerGroupSpecs") or ()):
            shapes.append((group["groupName"], worker_pods(group),
                           (*CLUSTER, "workerGroupSpecs", str(index), "template", "spec")))
        return shapes

    def size_field(self, path: tuple[str, ...]) -> str:
        """The group whose template is at `path` (a worker group's `replicas` sizes it)."""
        return dotted(path[:-2])

    def pod_sets(self, obj: Obj) -> list[PodSetInfo]:
        """Worker groups of no pods (suspended, or sized 0) are left out: a Workload's pod
        set holds at least one pod. Their templates are still pinned, like the others."""
        return [pod_set for pod_set in super().pod_sets(obj) if pod_set.count > 0]

    own_labels = (*TemplatedJob.own_labels, POD_LABEL)

    def template_labels(self, obj: Obj, pod_set: str, place_pods: bool) -> dict[str, str]:
        """Also the RayJob's name: its Ray pods, owned by the RayCluster, name it so."""
        return {**super().template_labels(obj, pod_set, place_pods),
                POD_LABEL: obj["metadata"]["name"]}

    def unsupported(self, obj: Obj) -> list[tuple[str, str]]:
        """What Kueue's RayJob webhook refuses too: a queued RayJob makes its own cluster,
        of pods counted at admission, and takes it down when the job ends."""
        spec = obj.get("spec") or {}
        cluster = spec.get("rayClusterSpec") or {}
        found = []
        if spec.get("clusterSelector"):
            found.append(("spec.clusterSelector", (
                f"is {json.dumps(spec['clusterSelector'])}: a queued RayJob cannot run on an "
                "existing Ray cluster, whose pods admitter never admitted; remove it and "
                "describe the cluster in spec.rayClusterSpec")))
        if not spec.get("shutdownAfterJobFinishes"):
            found.append(("spec.shutdownAfterJobFinishes", (
                f"is {json.dumps(spec.get('shutdownAfterJobFinishes', False))}: the Ray cluster "
                "would hold its quota after the job ends; set it to true")))
        if cluster.get("enableInTreeAutoscaling"):
            found.append(("spec.rayClusterSpec.enableInTreeAutoscaling", (
                "is true: the autoscaler would change the pod counts admitter admitted; "
                "set it to false and size each worker group with replicas")))
        for index, group in enumerate(cluster.get("workerGroupSpecs") or ()):
            if isinstance(group, dict) and group.get("groupName") == HEAD_POD_SET:
                found.append((f"spec.rayClusterSpec.workerGroupSpecs[{index}].groupName", (
                    f"is {HEAD_POD_SET!r}, the name of the head's pod set; rename the group")))
        return found

    def pods_ready(self, obj: Obj) -> int:
        """The Ray cluster's ready pods as KubeRay counts them: its ready workers, and the
        head once its `HeadPodReady` condition holds."""
        cluster = (obj.get("status") or {}).get("rayClusterStatus") or {}
        head = any(c.get("type") == "HeadPodReady" and c.get("status") == "True"
                   for c in cluster.get("conditions") or ())
        return int(cluster.get("readyWorkerReplicas") or 0) + int(head)

    def progress(self, obj: Obj) -> str:
        """`Running: Ray cluster tune-x7k2p, Ray job RUNNING`: KubeRay's deployment status, the
        Ray cluster it made and the Ray job's status. Not the cluster's pods: the RayJob's
        snapshot of its cluster's status (`rayClusterStatus`) can lag far behind them."""
        status = obj.get("status") or {}
        return (f"{status.get('jobDeploymentStatus') or 'Initializing'}: Ray cluster "
                f"{status.get('rayClusterName') or 'not made yet'}, Ray job "
                f"{status.get('jobStatus') or 'not submitted'}")

    def finished(self, obj: Obj) -> tuple[bool, str] | None:
        """Done once KubeRay says the deployment is `Complete` (the Ray job ended: succeeded,
        failed or stopped) or `Failed`/`ValidationFailed` (it gave up on it)."""
        status = obj.get("status") or {}
        deployment = status.get("jobDeploymentStatus")
        job = status.get("jobStatus") or "unknown"
        if deployment in FAILED_DEPLOYMENTS:
            reason = status.get("reason") or deployment
            return False, f"the RayJob failed ({reason})"
        if deployment == "Complete":
            if job == SUCCEEDED:
                return True, "the RayJob succeeded"
            return False, f"the RayJob's Ray job ended {job}"
        return None

