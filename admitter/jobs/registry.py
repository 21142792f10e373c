"""The kinds admitter queues, found by an object's `kind` (unique among them; informers'
objects may lack `apiVersion`).

A kind that resolves its pod sets from other objects (`ReadsRuntimes`: a TrainJob's training
runtime) reads them through the lookup of the `JobKinds` it belongs to: each controller builds
its own on its own informers, so two in one process never read each other's. `KINDS` reads
no runtimes: it serves what every kind knows of itself (names, paths, suspension, whether it
finished) and the webhook, which guards a runtime reader's size fields instead."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from admitter.jobs.batch_job import BatchJob
from admitter.jobs.claims import NO_CLAIMS, DeviceClaims
from admitter.jobs.interface import GenericJob, JobReader, LabelsPods, ReadsRuntimes
from admitter.jobs.jobset import JobSet
from admitter.jobs.plain_pod import PlainPod
from admitter.jobs.rayjob import RayJob
from admitter.jobs.trainjob import RuntimeLookup, TrainJob
from admitter.kube.objects import Obj, pod_requests


class JobKinds:
    """One set of the kinds admitter queues, those that read runtimes reading through
    `runtimes` ((kind, namespace, name) → the object or None; none found without one), and
    their pods' device claims counted through `claims`."""

    def __init__(self, runtimes: RuntimeLookup | None = None,
                 claims: DeviceClaims = NO_CLAIMS) -> None:
        self.claims = claims
        kinds: list[GenericJob] = [BatchJob(), JobSet(), RayJob(), TrainJob()]
        if runtimes is not None:
            kinds = [kind.reading(runtimes) if isinstance(kind, ReadsRuntimes) else kind
                     for kind in kinds]
        self.suspendable: dict[str, GenericJob] = {kind.kind: kind for kind in kinds}
        self.readers: dict[str, JobReader] = {**self.suspendable, PlainPod.kind: PlainPod()}

    def reader_of(self, obj: Obj) -> JobReader:
        """The kind of `obj`; a Job when the object does not say."""
        return self.readers[obj.get("kind") or BatchJob.kind]

    def job_of(self, obj: Obj) -> GenericJob:
        """The suspendable kind of `obj`; a Job when the object does not say."""
        return self.suspendable[obj.get("kind") or BatchJob.kind]

    def pod_demand(self, namespace: str, pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
        """What one pod of a pod set is charged, for every kind: its containers' requests
        (`pod_requests`) and the devices it claims through DRA, as quota resources. Raises
        UncountableClaim for a claim admitter cannot count."""
        return self.pod_demand_and_classes(namespace, pod_spec)[0]

    def pod_demand_and_classes(self, namespace: str, pod_spec: Mapping[str, Any],
                               ) -> tuple[dict[str, Decimal], set[str]]:
        """`pod_demand`, and the DeviceClasses whose devices the pod claims."""
        found = pod_requests(pod_spec)
        claimed, classes = self.claims.claimed(namespace, pod_spec)
        for resource, amount in claimed.items():
            found[resource] = found.get(resource, Decimal(0)) + amount
        return found, classes

    def runtime_readers(self) -> list[ReadsRuntimes]:
        return [kind for kind in self.suspendable.values() if isinstance(kind, ReadsRuntimes)]


KINDS = JobKinds()
SUSPENDABLE = KINDS.suspendable
"""The kinds the controller queues: watched, guarded by the webhooks, granted in RBAC."""
POD_LABELS: tuple[tuple[str, str], ...] = tuple(
    (kind.kind, kind.pod_label) for kind in SUSPENDABLE.values() if isinstance(kind, LabelsPods))
"""(kind, label) of the kinds whose pods are told apart by a label naming their job; one label
may name jobs of two kinds (a TrainJob's pods carry its JobSet's)."""
reader_of = KINDS.reader_of
job_of = KINDS.job_of
