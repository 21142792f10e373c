"""TrainJob (Kubeflow Trainer v2, `trainer.kubeflow.org/v1alpha1`): queued at the TrainJob,
not at the JobSet Trainer makes from it, and suspended through its `spec.suspend` (Trainer
keeps its JobSet suspended with it).

A TrainJob holds no pod template: its pod sets are those of the training runtime it names
(`spec.runtimeRef`, a ClusterTrainingRuntime unless it says TrainingRuntime), derived as
Trainer v2.0's runtime framework resolves them:
- one pod set per replicated job of the runtime's JobSet template;
- the job labelled `trainer.kubeflow.org/trainjob-ancestor-step: trainer` runs
  `spec.trainer.numNodes` pods (else the runtime's `mlPolicy.numNodes`, else 1), one replica,
  its `node` container with `spec.trainer.resourcesPerNode` as its resources; an MPI runtime
  that runs its launcher as a node gives the `node` job one pod fewer;
- any other job runs replicas × parallelism pods;
- the TrainJob's own `spec.podSpecOverrides` for a job add their nodeSelector and replace its
  tolerations.
The initializer jobs run before the trainer, yet are admitted with it as one gang, as Kueue
does: their quota is held for the whole run.

Its pods are labelled with its JobSet's name, the TrainJob's (`LabelsPods`). The controller
hands it a lookup on its informers of the runtimes (`ReadsRuntimes`); a TrainJob whose
runtime is missing waits, its reason naming the runtime, until the runtime appears.

The admitted domain is pinned the way Trainer lets a TrainJob place its pods: one
`podSpecOverrides` entry per replicated job, whose nodeSelector is the domain, after the
user's own entries (the user's list is kept in ORIGINAL_AFFINITY_ANNOTATION and put back)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from admitter.api.contract import ORIGINAL_AFFINITY_ANNOTATION
from admitter.jobs.interface import NO_NARROWER, PodSetInfo
from admitter.jobs.templated import SuspendsBySpec, mark_ops, unmark_ops
from admitter.kube.objects import Obj

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_ANCESTOR = "trainer"
NODE = "node"
KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
SIZE_FIELDS = (("spec", "trainer", "numNodes"), ("spec", "trainer", "resourcesPerNode"))
OVERRIDES = ("spec", "podSpecOverrides")

RuntimeLookup = Callable[[str, str, str], Obj | None]
"""(runtime kind, the TrainJob's namespace, runtime name) → the runtime as the API server
has it, or None if there is none."""


class MissingRuntime(ValueError):
    """The runtime a TrainJob names is not there (yet): the TrainJob waits, read again on
    every sweep of the controller."""


def _no_runtimes(kind: str, namespace: str, name: str) -> Obj | None:
    return None


def _whole(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{field} must be a whole number of at least 1, not {value!r}")
    return value


class TrainJob(SuspendsBySpec):
    api_version: ClassVar[str] = "trainer.kubeflow.org/v1alpha1"
    kind: ClassVar[str] = "TrainJob"
    workload_prefix: ClassVar[str] = "trainjob"
    plural: ClassVar[str] = "trainjobs"
    name_label: ClassVar[bool] = False
    pod_label = "jobset.sigs.k8s.io/jobset-name"
    ready_when_bound: ClassVar[bool] = True
    runtime_kinds: ClassVar[tuple[tuple[str, str, str, bool], ...]] = (
        (KINDS[0], api_version, "clustertrainingruntimes", False),
        (KINDS[1], api_version, "trainingruntimes", True))

    def __init__(self, runtimes: RuntimeLookup = _no_runtimes) -> None:
        self.runtimes = runtimes

    def use_runtimes(self, lookup: RuntimeLookup) -> None:
        self.runtimes = lookup

    def size_fields(self, obj: Obj) -> dict[str, Any]:
        trainer = obj["spec"].get("trainer") or {}
        return {".".join(path): trainer.get(path[-1]) for path in SIZE_FIELDS}

    def runtime_of(self, obj: Obj) -> Obj:
        """The training runtime the TrainJob names; an error naming it if there is none."""
        ref = obj["spec"].get("runtimeRef") or {}
        kind = ref.get("kind") or KINDS[0]
        if kind not in KINDS:
            raise ValueError(f"spec.runtimeRef.kind must be one of {', '.join(KINDS)}, "
                             f"not {kind!r}")
        found = self.runtimes(kind, obj["metadata"].get("namespace", ""), ref.get("name", ""))
        if found is None:
            raise MissingRuntime(f"spec.runtimeRef: no {kind} {ref.get('name')!r}; the TrainJob "
                                 "waits until it exists")
        return found

    def pod_sets(self, obj: Obj) -> list[PodSetInfo]:
        runtime = self.runtime_of(obj)["spec"]
        policy = runtime.get("mlPolicy") or {}
        trainer = obj["spec"].get("trainer") or {}
        nodes = _whole(trainer.get("numNodes", policy.get("numNodes", 1)), "spec.trainer.numNodes")
        launcher_is_node = bool((policy.get("mpi") or {}).get("runLauncherAsNode"))
        overrides = self.user_overrides(obj)
        found = []
        for job in (runtime["template"]["spec"]["replicatedJobs"]):
            job_spec = job["template"]["spec"]
            spec = copy.deepcopy(job_spec["template"]["spec"])
            labels = (job["template"].get("metadata") or {}).get("labels") or {}
            if labels.get(ANCESTOR_LABEL) == TRAINER_ANCESTOR:
                count = nodes
                _set_node_resources(spec, trainer.get("resourcesPerNode"))
            else:
                count = int(job.get("replicas", 1)) * int(job_spec.get("parallelism", 1))
            if launcher_is_node and job["name"] == NODE:
                count = max(nodes - 1, 1)
            for override in overrides:
                if any(t.get("name") == job["name"] for t in override.get("targetJobs") or ()):
                    _override(spec, override)
            # The template is in the runtime: the TrainJob is pinned through its overrides.
            template = job_spec["template"].get("metadata") or {}
            found.append(PodSetInfo(job["name"], max(count, 1), spec, OVERRIDES,
                                    annotations=template.get("annotations") or {}))
        return found

    def pods_ready(self, obj: Obj) -> int:
        """Its status counts child Jobs per replicated job (`jobsStatus`); each ready or
        succeeded Job has all its pods ready or done (Trainer v2.0 leaves it empty)."""
        statuses = (obj.get("status") or {}).get("jobsStatus") or ()
        if not statuses:
            return 0
        replicas = {job["name"]: int(job.get("replicas", 1)) for job in
                    self.runtime_of(obj)["spec"]["template"]["spec"]["replicatedJobs"]}
        per_job = {pod_set.name: pod_set.count // max(replicas.get(pod_set.name, 1), 1)
                   for pod_set in self.pod_sets(obj)}
        return sum((int(status.get("ready", 0)) + int(status.get("succeeded", 0)))
                   * per_job.get(status.get("name"), 0)
                   for status in statuses)

    def finished(self, obj: Obj) -> tuple[bool, str] | None:
        conditions = {c.get("type"): c.get("status")
                      for c in (obj.get("status") or {}).get("conditions") or ()}
        if conditions.get("Failed") == "True":
            return False, "the TrainJob failed"
        if conditions.get("Complete") == "True":
            return True, "the TrainJob completed"
        return None

    def user_overrides(self, obj: Obj) -> list[Obj]:
        """The TrainJob's podSpecOverrides as the user wrote them (while admitted, the
        annotation keeps them and the spec also holds admitter's pins)."""
        annotations = obj["metadata"].get("annotations") or {}
        if ORIGINAL_AFFINITY_ANNOTATION in annotations:
            kept: list[Obj] = json.loads(annotations[ORIGINAL_AFFINITY_ANNOTATION])
            return kept
        return list(obj["spec"].get("podSpecOverrides") or [])

    def run_patch(self, obj: Obj, workload_name: str, domain: Mapping[str, str],
                  narrower: Mapping[str, Mapping[str, str]] = NO_NARROWER) -> list[Obj]:
        own = self.user_overrides(obj)
        ops = mark_ops(obj, workload_name, json.dumps(own))
        pins = [{"targetJobs": [{"name": pod_set.name}],
                 "nodeSelector": dict(narrower.get(pod_set.name, domain))}
                for pod_set in self.pod_sets(obj) if narrower.get(pod_set.name, domain)]
        ops.append({"op": "add", "path": "/spec/podSpecOverrides", "value": own + pins})
        ops.append({"op": "add", "path": "/spec/suspend", "value": False})
        return ops

    def restore_patch(self, obj: Obj) -> list[Obj]:
        own = self.user_overrides(obj)
        ops = unmark_ops(obj)
        if own:
            ops.append({"op": "add", "path": "/spec/podSpecOverrides", "value": own})
        elif "podSpecOverrides" in obj["spec"]:
            ops.append({"op": "remove", "path": "/spec/podSpecOverrides"})
        return ops


def _set_node_resources(spec: Obj, resources: Obj | None) -> None:
    """Trainer gives the trainer job's `node` container the TrainJob's resourcesPerNode."""
    if not resources or not (resources.get("limits") or resources.get("requests")):
        return
    for container in spec.get("containers") or ():
        if container.get("name") == NODE:
            container["resources"] = {key: resources[key] for key in ("limits", "requests")
                                      if resources.get(key)}


def _override(spec: Obj, override: Obj) -> None:
    """A user's podSpecOverride as Trainer merges it: nodeSelector keys added, tolerations
    replaced."""
    if override.get("nodeSelector"):
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **override["nodeSelector"]}
    if override.get("tolerations"):
        spec["tolerations"] = list(override["tolerations"])
