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
`ray job submit` once the cluster is up) is not a pod set here."""

from __future__ import annotations

from typing import Any

from admitter.jobs.interface import Obj, PodSetInfo
from admitter.jobs.templated import TemplatedJob

HEAD_POD_SET = "head"
CLUSTER = ("spec", "rayClusterSpec")
SUCCEEDED = "SUCCEEDED"
FAILED_DEPLOYMENTS = frozenset({"Failed", "ValidationFailed"})


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

    def pod_sets(self, obj: Obj) -> list[PodSetInfo]:
        """Worker groups of no pods (suspended, or sized 0) are left out: a Workload's pod
        set holds at least one pod. Their templates are still pinned, like the others."""
        return [pod_set for pod_set in super().pod_sets(obj) if pod_set.count > 0]

    def pods_ready(self, obj: Obj) -> int:
        """The Ray cluster's ready pods as KubeRay counts them: its ready workers, and the
        head once its `HeadPodReady` condition holds."""
        cluster = (obj.get("status") or {}).get("rayClusterStatus") or {}
        head = any(c.get("type") == "HeadPodReady" and c.get("status") == "True"
                   for c in cluster.get("conditions") or ())
        return int(cluster.get("readyWorkerReplicas") or 0) + int(head)

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
