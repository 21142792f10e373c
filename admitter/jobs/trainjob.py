"""TrainJob (Kubeflow Trainer v2, `trainer.kubeflow.org/v1alpha1`): queued at the TrainJob,
not at the JobSet Trainer makes from it, and suspended through its `spec.suspend` (Trainer
keeps its JobSet suspended with it).

A TrainJob holds no pod template: its pod sets are those of the training runtime it names
(`spec.runtimeRef`, a ClusterTrainingRuntime unless it says TrainingRuntime), derived as
Trainer v2.0's runtime framework resolves them (`pod_set_shapes`, docs/kinds.md):
- one pod set per replicated job of the runtime's JobSet template, of replicas × parallelism
  pods (`parallelism` defaults to 1);
- the trainer job (labelled `trainer.kubeflow.org/trainjob-ancestor-step: trainer`) and the
  initializers run one replica; the trainer job's parallelism is the runtime's
  `mlPolicy.numNodes` (1 if unset) when the runtime has an ML policy, and its `node` container
  gets `spec.trainer.resourcesPerNode`;
- `spec.trainer.numNodes`, when set, sizes the job its ML policy names: on an MPI runtime the
  job named `node` (one pod fewer when the launcher runs as a node: the launcher is one of the
  nodes), on any other runtime (torch, JAX, plain) the trainer job;
- the TrainJob's own `spec.podSpecOverrides` for a job add their nodeSelector and replace its
  tolerations.
The initializer jobs run before the trainer, yet are admitted with it as one gang, as Kueue
does: their quota is held for the whole run.

Its pods are labelled with its JobSet's name, the TrainJob's (`LabelsPods`). Each controller
makes itself a TrainJob reading through its own informers of the runtimes (`ReadsRuntimes`);
a TrainJob whose runtime is missing waits, its reason naming the runtime, until the runtime
appears, and a runtime made or changed wakes the TrainJobs that name it.

The admitted domain is pinned the way Trainer lets a TrainJob place its pods: one
`podSpecOverrides` entry per replicated job, whose nodeSelector is the domain (and whose
scheduling gate holds each pod until admitter names its node), after the user's own entries
(the user's list is kept in ORIGINAL_AFFINITY_ANNOTATION and put back)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from admitter.api.contract import ORIGINAL_AFFINITY_ANNOTATION
from admitter.jobs.interface import NO_NARROWER, PodSetInfo
from admitter.jobs.templated import SuspendsBySpec, mark_ops, unmark_ops
from admitter.kube.objects import PLACEMENT_GATE, Obj

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_ANCESTOR = "trainer"
NODE = "node"
ONE_REPLICA = frozenset({TRAINER_ANCESTOR, "dataset-initializer", "model-initializer"})
"""The ancestors whose replicated job Trainer always runs as one replica."""
KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
NAMESPACED = KINDS[1]
"""The runtime kind that lives in the TrainJob's namespace."""
SIZE_FIELDS = (("spec", "trainer", "numNodes"), ("spec", "trainer", "resourcesPerNode"))
OVERRIDES = ("spec", "podSpecOverrides")

RuntimeLookup = Callable[[str, str, str], Obj | None]
"""(runtime kind, its namespace (empty for a ClusterTrainingRuntime), runtime name) → the
runtime as the API server has it, or None if there is none."""


@dataclass(frozen=True)
class JobShape:
    """One replicated job of a runtime as Trainer runs it for a TrainJob: `replicas` child
    Jobs of `per_job` pods each."""

    job: Obj
    replicas: int
    per_job: int
    trainer: bool
    """Whether it is the trainer job, whose `node` container runs with resourcesPerNode."""


class MissingRuntime(ValueError):
    """The runtime a TrainJob names is not there (yet): the TrainJob waits, read again as
    soon as the runtime's watch sees it made."""


def _no_runtimes(kind: str, namespace: str, name: str) -> Obj | None:
    return None


def _whole(value: Any, field: str, least: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ValueError(f"{field} must be a whole number of at least {least}, not {value!r}")
    return value


class TrainJob(SuspendsBySpec):
    api_version: ClassVar[str] = "trainer.kubeflow.org/v1alpha1"
    kind: ClassVar[str] = "TrainJob"
    workload_prefix: ClassVar[str] = "trainjob"
    plural: ClassVar[str] = "trainjobs"
    name_label: ClassVar[bool] = False
    pod_label = "jobset.sigs.k8s.io/jobset-name"
    ready_when_bound: ClassVar[bool] = True
    shaped_at_start: ClassVar[bool] = True
    runtime_kinds: ClassVar[tuple[tuple[str, str, str, bool], ...]] = (
        (KINDS[0], api_version, "clustertrainingruntimes", False),
        (KINDS[1], api_version, "trainingruntimes", True))

    def __init__(self, runtimes: RuntimeLookup = _no_runtimes) -> None:
        self.runtimes = runtimes

    def reading(self, lookup: RuntimeLookup) -> TrainJob:
        return TrainJob(lookup)

    def size_fields(self, obj: Obj) -> dict[str, Any]:
        trainer = obj["spec"].get("trainer") or {}
        return {".".join(path): trainer.get(path[-1]) for path in SIZE_FIELDS}

    def runtime_key(self, obj: Obj) -> tuple[str, str, str]:
        ref = obj["spec"].get("runtimeRef") or {}
        kind = ref.get("kind") or KINDS[0]
        if kind not in KINDS:
            raise ValueError(f"spec.runtimeRef.kind must be one of {', '.join(KINDS)}, "
                             f"not {kind!r}")
        namespace = obj["metadata"].get("namespace", "") if kind == NAMESPACED else ""
        return kind, namespace, ref.get("name", "")

    def runtime_of(self, obj: Obj) -> Obj:
        """The training runtime the TrainJob names; an error naming it if there is none."""
        kind, namespace, name = self.runtime_key(obj)
        found = self.runtimes(kind, namespace, name)
        if found is None:
            raise MissingRuntime(f"spec.runtimeRef: no {kind} {name!r}; the TrainJob "
                                 "waits until it exists")
        return found

    def pod_set_shapes(self, obj: Obj) -> list[JobShape]:
        """Each replicated job of the runtime as Trainer sizes it for this TrainJob."""
        runtime = self.runtime_of(obj)["spec"]
        policy = runtime.get("mlPolicy")
        trainer = obj["spec"].get("trainer") or {}
        wanted = trainer.get("numNodes")
        if wanted is not None:
            _whole(wanted, "spec.trainer.numNodes")
        mpi = (policy or {}).get("mpi")
        found = []
        for index, job in enumerate(runtime["template"]["spec"]["replicatedJobs"]):
            where = f"the runtime's spec.template.spec.replicatedJobs[{index}]"
            job_spec = job["template"]["spec"]
            labels = (job["template"].get("metadata") or {}).get("labels") or {}
            ancestor = labels.get(ANCESTOR_LABEL)
            per_job = _whole(job_spec.get("parallelism", 1), f"{where}.template.spec.parallelism",
                             least=0)
            if ancestor == TRAINER_ANCESTOR and policy is not None:
                per_job = _whole(policy.get("numNodes", 1), "the runtime's spec.mlPolicy.numNodes")
            if wanted is not None and mpi is not None and job["name"] == NODE:
                per_job = max(wanted - 1, 1) if mpi.get("runLauncherAsNode") else wanted
            elif wanted is not None and mpi is None and ancestor == TRAINER_ANCESTOR:
                per_job = wanted
            replicas = (1 if ancestor in ONE_REPLICA
                        else _whole(job.get("replicas", 1), f"{where}.replicas"))
            # Trainer runs at least one pod of every job.
            found.append(JobShape(job, replicas, max(per_job, 1), ancestor == TRAINER_ANCESTOR))
        return found

    def pod_sets(self, obj: Obj) -> list[PodSetInfo]:
        trainer = obj["spec"].get("trainer") or {}
        overrides = self.user_overrides(obj)
        found = []
        for shape in self.pod_set_shapes(obj):
            name, job_spec = shape.job["name"], shape.job["template"]["spec"]
            spec = copy.deepcopy(job_spec["template"]["spec"])
            if shape.trainer:
                _set_node_resources(spec, trainer.get("resourcesPerNode"))
            for override in overrides:
                if any(t.get("name") == name for t in override.get("targetJobs") or ()):
                    _override(spec, override)
            # The template is in the runtime: the TrainJob is pinned through its overrides.
            template = job_spec["template"].get("metadata") or {}
            found.append(PodSetInfo(name, shape.replicas * shape.per_job, spec, OVERRIDES,
                                    annotations=template.get("annotations") or {}))
        return found

    def pods_ready(self, obj: Obj) -> int:
        """Its status counts child Jobs per replicated job (`jobsStatus`); each ready or
        succeeded Job has all its pods ready or done (Trainer v2.0 leaves it empty, and a
        runtime deleted meanwhile leaves nothing to count by: `ReadyWhenBound` then counts
        its pods on nodes)."""
        statuses = (obj.get("status") or {}).get("jobsStatus") or ()
        try:
            shapes = self.pod_set_shapes(obj) if statuses else []
        except MissingRuntime:  # deleted while it runs: its pods on nodes tell readiness
            return 0
        per_job = {shape.job["name"]: shape.per_job for shape in shapes}
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
                  narrower: Mapping[str, Mapping[str, str]] = NO_NARROWER,
                  place_pods: bool = False) -> list[Obj]:
        """Also, when each pod is to be placed on its node, the placement gate on each
        replicated job's pods through the same entry: Trainer offers no way to label its
        pods for the placement webhook, and gates them through `podSpecOverrides`."""
        own = self.user_overrides(obj)
        ops = mark_ops(obj, workload_name, json.dumps(own))
        pins = []
        for pod_set in self.pod_sets(obj):
            pin: Obj = {"targetJobs": [{"name": pod_set.name}]}
            if narrower.get(pod_set.name, domain):
                pin["nodeSelector"] = dict(narrower.get(pod_set.name, domain))
            if place_pods:
                pin["schedulingGates"] = [{"name": PLACEMENT_GATE}]
            if len(pin) > 1:
                pins.append(pin)
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
