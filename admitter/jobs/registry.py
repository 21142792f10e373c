"""The kinds admitter queues, found by an object's `kind` (unique among them; informers'
objects may lack `apiVersion`)."""

from __future__ import annotations

from admitter.jobs.batch_job import BatchJob
from admitter.jobs.interface import GenericJob, JobReader, Obj
from admitter.jobs.jobset import JobSet
from admitter.jobs.plain_pod import PlainPod
from admitter.jobs.rayjob import RayJob
from admitter.jobs.trainjob import TrainJob

SUSPENDABLE: dict[str, GenericJob] = {kind.kind: kind for kind in (BatchJob(), JobSet())}
"""The kinds the controller queues: watched, guarded by the webhooks, granted in RBAC."""
SUSPENDABLE[TrainJob.kind] = TrainJob()
INTERFACES: dict[str, GenericJob] = {**SUSPENDABLE, RayJob.kind: RayJob()}
"""Every kind the job interface can read, start and suspend. RayJob is not queued yet: its
pods are made by a RayCluster and carry no label naming the RayJob, so the controller could
not yet tell them from other work."""
READERS: dict[str, JobReader] = {**INTERFACES, PlainPod.kind: PlainPod()}


def reader_of(obj: Obj) -> JobReader:
    """The kind of `obj`; a Job when the object does not say."""
    return READERS[obj.get("kind") or BatchJob.kind]


def job_of(obj: Obj) -> GenericJob:
    """The suspendable kind of `obj`; a Job when the object does not say."""
    return INTERFACES[obj.get("kind") or BatchJob.kind]
