"""The kinds admitter queues, found by an object's `kind` (unique among them; informers'
objects may lack `apiVersion`)."""

from __future__ import annotations

from admitter.jobs.batch_job import BatchJob
from admitter.jobs.interface import GenericJob, JobReader, LabelsPods, Obj
from admitter.jobs.jobset import JobSet
from admitter.jobs.plain_pod import PlainPod
from admitter.jobs.rayjob import RayJob

SUSPENDABLE: dict[str, GenericJob] = {kind.kind: kind
                                      for kind in (BatchJob(), JobSet(), RayJob())}
"""The kinds the controller queues: watched, guarded by the webhooks, granted in RBAC."""
POD_LABELS: dict[str, str] = {kind.pod_label: kind.kind for kind in SUSPENDABLE.values()
                              if isinstance(kind, LabelsPods)}
"""Label → kind, of the kinds whose pods are told apart by a label naming their job."""
READERS: dict[str, JobReader] = {**SUSPENDABLE, PlainPod.kind: PlainPod()}


def reader_of(obj: Obj) -> JobReader:
    """The kind of `obj`; a Job when the object does not say."""
    return READERS[obj.get("kind") or BatchJob.kind]


def job_of(obj: Obj) -> GenericJob:
    """The suspendable kind of `obj`; a Job when the object does not say."""
    return SUSPENDABLE[obj.get("kind") or BatchJob.kind]
