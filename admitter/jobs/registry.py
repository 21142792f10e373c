"""The kinds admitter queues, found by an object's `kind` (unique among them; informers'
objects may lack `apiVersion`)."""

from __future__ import annotations

from admitter.jobs.batch_job import BatchJob
from admitter.jobs.interface import GenericJob, JobReader, LabelsPods
from admitter.jobs.jobset import JobSet
from admitter.jobs.plain_pod import PlainPod
from admitter.jobs.rayjob import RayJob
from admitter.jobs.trainjob import TrainJob
from admitter.kube.objects import Obj

SUSPENDABLE: dict[str, GenericJob] = {kind.kind: kind
                                      for kind in (BatchJob(), JobSet(), RayJob(), TrainJob())}
"""The kinds the controller queues: watched, guarded by the webhooks, granted in RBAC."""
POD_LABELS: tuple[tuple[str, str], ...] = tuple(
    (kind.kind, kind.pod_label) for kind in SUSPENDABLE.values() if isinstance(kind, LabelsPods))
"""(kind, label) of the kinds whose pods are told apart by a label naming their job; one label
may name jobs of two kinds (a TrainJob's pods carry its JobSet's)."""
READERS: dict[str, JobReader] = {**SUSPENDABLE, PlainPod.kind: PlainPod()}


def reader_of(obj: Obj) -> JobReader:
    """The kind of `obj`; a Job when the object does not say."""
    return READERS[obj.get("kind") or BatchJob.kind]


def job_of(obj: Obj) -> GenericJob:
    """The suspendable kind of `obj`; a Job when the object does not say."""
    return SUSPENDABLE[obj.get("kind") or BatchJob.kind]
