"""JobSet (`jobset.x-k8s.io/v1alpha2`): one pod set per replicated job, of replicas ×
parallelism pods, admitted all together (the core admits a Workload's pod sets as one gang),
and the JobSet's topology annotations hold for all of them.

JobSet's webhook lets a suspended JobSet's pod templates change only in labels, annotations,
nodeSelector, tolerations and scheduling gates (not affinity), so the admitted domain is
pinned through each template's `nodeSelector` (the domain's labels added to the user's own)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from admitter.jobs.batch_job import pod_count, pod_counts
from admitter.jobs.templated import TemplatedJob
from admitter.kube.objects import Obj


class JobSet(TemplatedJob):
    api_version = "jobset.x-k8s.io/v1alpha2"
    kind = "JobSet"
    workload_prefix = "jobset"
    plural = "jobsets"
    name_label = True
    pin_field = "nodeSelector"
    pod_label = "jobset.sigs.k8s.io/jobset-name"

    def pin(self, own: Any, domain: Mapping[str, str]) -> Any:
        return {**(own or {}), **domain} or None

    def pod_set_shapes(self, obj: Obj) -> list[tuple[str, int, tuple[str, ...]]]:
        return [(replicated["name"],
                 int(replicated.get("replicas", 1)) * pod_count(replicated["template"]["spec"]),
                 ("spec", "replicatedJobs", str(index), "template", "spec", "template", "spec"))
                for index, replicated in enumerate(obj["spec"]["replicatedJobs"])]

    def pods_ready(self, obj: Obj) -> int:
        """Its status counts child Jobs per replicated job; each ready or succeeded Job has
        all its pods ready or done."""
        per_job = {replicated["name"]: pod_count(replicated["template"]["spec"])
                   for replicated in obj["spec"]["replicatedJobs"]}
        return sum((int(status.get("ready", 0)) + int(status.get("succeeded", 0)))
                   * per_job.get(status.get("name"), 0)
                   for status in (obj.get("status") or {}).get("replicatedJobsStatus") or ())

    def progress(self, obj: Obj) -> str:
        """Per replicated job, its child Jobs active, ready, succeeded and failed."""
        return "; ".join(f"{status.get('name')}: {pod_counts(status)} Jobs" for status in
                         (obj.get("status") or {}).get("replicatedJobsStatus") or ()
                         ) or "no Jobs yet"

    def finished(self, obj: Obj) -> tuple[bool, str] | None:
        conditions = {c.get("type"): c.get("status")
                      for c in (obj.get("status") or {}).get("conditions") or ()}
        if conditions.get("Failed") == "True":
            return False, "the JobSet failed"
        if conditions.get("Completed") == "True":
            return True, "the JobSet completed"
        return None
