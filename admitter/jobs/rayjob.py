"""RayJob (KubeRay, `ray.io/v1`): its pod sets are everything KubeRay runs for it, admitted as
one gang and suspended through `spec.suspend` (KubeRay deletes the RayCluster and the submitter
Job of a suspended RayJob and makes them anew from the RayJob's spec on unsuspend, so the
templates may be pinned while it is suspended):
- the Ray cluster it makes: the head group (one pod) and each worker group;
- in `K8sJobMode` (`spec.submissionMode`'s default), last, `submitter`: the one pod of the
  Kubernetes Job KubeRay makes, once the cluster is up, to run `ray job submit`, from
  `spec.submitterPodTemplate`, or KubeRay's default template when the user gave none (one
  container `ray-job-submitter` of the head's image, requests 500m CPU and 200Mi, limits 1 CPU
  and 1Gi: KubeRay's `GetDefaultSubmitterTemplate`);
- in `SidecarMode`, no pod set more, but the head's pods ask the submitter container KubeRay
  adds to them too (the default's resources: KubeRay ignores `submitterPodTemplate` there);
- `HTTPMode` and `InteractiveMode` run no submitter pod.
As Kueue's RayJob integration does, so a RayJob's quota charges every pod it runs.

A worker group counts the pods KubeRay starts it with: `replicas` held inside
[`minReplicas`, `maxReplicas`] (`maxReplicas` when the two contradict), times `numOfHosts`,
exactly as KubeRay's RayCluster controller sizes it. Not `maxReplicas`: it defaults to 2^31-1
and would ask quota for pods that never run; growth beyond the start size is the autoscaler's
business, which a queued RayJob should not use (it would outgrow its admission).

KubeRay labels the Ray pods only with the generated RayCluster's name (`ray.io/cluster`), and
they are owned by that RayCluster (the submitter pod by its Job), not by the RayJob. So
admitter labels every template with the RayJob's name (`POD_LABEL`) in the same patch that
starts it; KubeRay copies template labels onto every pod it makes, so the running pods name
their RayJob directly, as a JobSet's do. A RayJob without a `submitterPodTemplate` gets, in
that patch, the default template KubeRay would have made (marked `MADE_TEMPLATE_ANNOTATION`;
KubeRay fills in its command, as it does for any template without one), pinned and labelled
like the others; restoring after an eviction takes admitter's marks off, and a template
admitter made goes whole, so the RayJob is again what its user wrote.

Hazards:
- Readiness: KubeRay's status counts the cluster's ready pods, and the submitter starts only
  once they are all up, so the submitter counts as ready with them (`pods_ready`): a
  pods-ready deadline never evicts a RayJob whose cluster is up and whose submitter is still
  to come.
- Topology: the submitter pod set is pinned to the admitted domain like the Ray pods (or to
  a narrower one its template's annotations ask for, as Kueue reads them): admitter admits a
  workload into one domain, the core counts the submitter's CPU there, and a pod outside it
  would use room the core counted free for others; it also keeps the submitter near the
  head it talks to. Its 500m CPU joins what the domain must hold.
- Pod sets: with the submitter, a `K8sJobMode` RayJob holds at most MAX_POD_SETS - 2 worker
  groups (the webhook names the limit).
- Upgrade: a RayJob an earlier admitter started without a submitter pod set keeps being read
  without one while it runs (`started_uncharged`), so it matches its Workload and is not
  evicted as changed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION
from admitter.jobs.interface import NO_NARROWER, PodSetInfo, dotted, pointer
from admitter.jobs.templated import TemplatedJob
from admitter.kube.objects import Obj

HEAD_POD_SET = "head"
SUBMITTER_POD_SET = "submitter"
CLUSTER = ("spec", "rayClusterSpec")
SUBMITTER_TEMPLATE = ("spec", "submitterPodTemplate")
HEAD_IMAGE = (*CLUSTER, "headGroupSpec", "template", "spec", "containers", "0", "image")
"""KubeRay's default submitter runs the head's first container's image."""
K8S_JOB_MODE = "K8sJobMode"
SIDECAR_MODE = "SidecarMode"
SUBMITTER_CONTAINER = "ray-job-submitter"
SUBMITTER_RESOURCES = {"limits": {"cpu": "1", "memory": "1Gi"},
                       "requests": {"cpu": "500m", "memory": "200Mi"}}
"""KubeRay's default submitter container's resources (`GetDefaultSubmitterContainer`)."""
MADE_TEMPLATE_ANNOTATION = "admitter.dev/made-submitter-template"
"""On a `submitterPodTemplate` admitter wrote (the RayJob had none): restoring removes it."""
SUCCEEDED = "SUCCEEDED"
FAILED_DEPLOYMENTS = frozenset({"Failed", "ValidationFailed"})
POD_LABEL = "admitter.dev/rayjob-name"
"""Put on a started RayJob's templates: its pods name the RayJob."""


def _count(group: Obj, field: str, default: int) -> int:
    value = group.get(field, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"workerGroupSpecs[{group.get('groupName')}].{field} must be a "
                         f"whole number of at least 0, not {value!r}")
    return value


def submission_mode(obj: Obj) -> str:
    """How KubeRay submits the Ray job: `spec.submissionMode`, `K8sJobMode` when unset (the
    CRD defaults it, so a RayJob read from the API server always names one)."""
    mode = obj["spec"].get("submissionMode")
    return K8S_JOB_MODE if mode is None else str(mode)


def submitter_container() -> Obj:
    """KubeRay's default submitter container as admitter reads it (it runs the head's image)."""
    resources = {key: dict(amounts) for key, amounts in SUBMITTER_RESOURCES.items()}
    return {"name": SUBMITTER_CONTAINER, "resources": resources}


def started_uncharged(obj: Obj) -> bool:
    """Started by an admitter that charged no submitter: marked as started, with no
    `POD_LABEL` on its submitter template, which every start now puts there (on the template
    the user gave, or on the one admitter writes). Such a RayJob is read as it was admitted,
    without a submitter pod set, so an upgrade does not evict every running RayJob as
    changed; its submitter pod counts as foreign usage on its node until the RayJob ends or
    is evicted, after which it is charged like any other."""
    if ADMITTED_WORKLOAD_ANNOTATION not in (obj["metadata"].get("annotations") or {}):
        return False
    template = obj["spec"].get(SUBMITTER_TEMPLATE[-1]) or {}
    return POD_LABEL not in ((template.get("metadata") or {}).get("labels") or {})


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
        if submission_mode(obj) == K8S_JOB_MODE and not started_uncharged(obj):
            shapes.append((SUBMITTER_POD_SET, 1, (*SUBMITTER_TEMPLATE, "spec")))
        return shapes

    def size_field(self, path: tuple[str, ...]) -> str:
        """The group whose template is at `path` (a worker group's `replicas` sizes it); the
        submitter's one pod comes with the submission mode."""
        if path[:len(SUBMITTER_TEMPLATE)] == SUBMITTER_TEMPLATE:
            return dotted((*SUBMITTER_TEMPLATE[:-1], "submissionMode"))
        return dotted(path[:-2])

    def with_submitter(self, obj: Obj) -> Obj:
        """`obj` as admitter reads and pins it: in `K8sJobMode` without a
        `submitterPodTemplate`, with the template admitter writes for it at start (KubeRay's
        default, marked as admitter's; of its pod spec, what admitter reads)."""
        if (submission_mode(obj) != K8S_JOB_MODE
                or obj["spec"].get(SUBMITTER_TEMPLATE[-1]) is not None
                or started_uncharged(obj)):
            return obj
        made = {"metadata": {"annotations": {MADE_TEMPLATE_ANNOTATION: "true"}},
                "spec": {"containers": [submitter_container()]}}
        return {**obj, "spec": {**obj["spec"], SUBMITTER_TEMPLATE[-1]: made}}

    def pod_sets(self, obj: Obj) -> list[PodSetInfo]:
        """Worker groups of no pods (suspended, or sized 0) are left out: a Workload's pod
        set holds at least one pod. Their templates are still pinned, like the others. In
        `SidecarMode` the head's pods also run KubeRay's submitter container."""
        found = [pod_set for pod_set in super().pod_sets(self.with_submitter(obj))
                 if pod_set.count > 0]
        if submission_mode(obj) != SIDECAR_MODE:
            return found
        return [replace(pod_set, pod_spec={
            **pod_set.pod_spec,
            "containers": [*(pod_set.pod_spec.get("containers") or ()), submitter_container()]})
            if pod_set.name == HEAD_POD_SET else pod_set for pod_set in found]

    def user_affinities(self, obj: Obj) -> list[Any]:
        """Also of the submitter template admitter writes at start, when the RayJob has none."""
        return super().user_affinities(self.with_submitter(obj))

    def run_patch(self, obj: Obj, workload_name: str, domain: Mapping[str, str],
                  narrower: Mapping[str, Mapping[str, str]] = NO_NARROWER,
                  place_pods: bool = False) -> list[Obj]:
        """Also, first, the submitter template admitter makes for a RayJob that has none
        (`with_submitter`), KubeRay's default whole: `restartPolicy: Never`, and the head's
        image, copied by the API server (`copy`: the cached RayJob admitter starts from keeps
        no images); then it is pinned and labelled like the others."""
        view = self.with_submitter(obj)
        ops = super().run_patch(view, workload_name, domain, narrower, place_pods)
        if view is obj:
            return ops
        made = view["spec"][SUBMITTER_TEMPLATE[-1]]
        image = (*SUBMITTER_TEMPLATE, "spec", "containers", "0", "image")
        return [{"op": "add", "path": pointer(SUBMITTER_TEMPLATE),
                 "value": {**made, "spec": {**made["spec"], "restartPolicy": "Never"}}},
                {"op": "copy", "from": pointer(HEAD_IMAGE), "path": pointer(image)}, *ops]

    def restore_patch(self, obj: Obj) -> list[Obj]:
        """Also the submitter template taken away whole if admitter made it."""
        ops = super().restore_patch(self.with_submitter(obj))
        template = obj["spec"].get(SUBMITTER_TEMPLATE[-1]) or {}
        if MADE_TEMPLATE_ANNOTATION in ((template.get("metadata") or {}).get("annotations")
                                        or {}):
            ops.append({"op": "remove", "path": pointer(SUBMITTER_TEMPLATE)})
        return ops

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
        reserved = {HEAD_POD_SET: "the head's"}
        if submission_mode(obj) == K8S_JOB_MODE:
            reserved[SUBMITTER_POD_SET] = "the submitter's"
        for index, group in enumerate(cluster.get("workerGroupSpecs") or ()):
            name = group.get("groupName") if isinstance(group, dict) else None
            if name in reserved:
                found.append((f"spec.rayClusterSpec.workerGroupSpecs[{index}].groupName", (
                    f"is {name!r}, the name of {reserved[name]} pod set; rename the group")))
        return found

    def pods_ready(self, obj: Obj) -> int:
        """The Ray cluster's ready pods as KubeRay counts them: its ready workers, and the
        head once its `HeadPodReady` condition holds; and the submitter's pod once they all
        are: KubeRay makes it only then, so a gang whose cluster is up is ready (a pods-ready
        deadline must not evict it while its submitter is being made, gated and placed)."""
        cluster = (obj.get("status") or {}).get("rayClusterStatus") or {}
        head = any(c.get("type") == "HeadPodReady" and c.get("status") == "True"
                   for c in cluster.get("conditions") or ())
        ready = int(cluster.get("readyWorkerReplicas") or 0) + int(head)
        *ray, last = self.pod_set_shapes(obj)
        if last[0] == SUBMITTER_POD_SET and ready >= sum(count for _, count, _ in ray):
            ready += 1
        return ready

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

