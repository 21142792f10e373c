"""`batch/v1` Job: one pod set, `main`, of as many pods as run at once."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from admitter.jobs.templated import TemplatedJob
from admitter.kube.objects import Obj

MAIN_POD_SET = "main"


def pod_count(job_spec: Mapping[str, Any]) -> int:
    """Pods a Job runs at once, which its Workload is charged for: its parallelism, at most
    its completions, at least one."""
    parallelism = job_spec.get("parallelism", 1)
    completions = job_spec.get("completions")
    count = min(parallelism, completions) if completions is not None else parallelism
    return max(int(count), 1)


def pod_counts(status: Mapping[str, Any]) -> str:
    """`3 active, 3 ready, 0 succeeded, 0 failed`: a Job's pods (or a JobSet's Jobs), as its
    status counts them."""
    return ", ".join(f"{status.get(field, 0)} {field}"
                     for field in ("active", "ready", "succeeded", "failed"))


def _is_true(obj: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())


class BatchJob(TemplatedJob):
    api_version = "batch/v1"
    kind = "Job"
    workload_prefix = "job"
    plural = "jobs"
    name_label = True

    def pod_set_shapes(self, obj: Obj) -> list[tuple[str, int, tuple[str, ...]]]:
        return [(MAIN_POD_SET, pod_count(obj["spec"]), ("spec", "template", "spec"))]

    def size_field(self, path: tuple[str, ...]) -> str:
        return "spec.parallelism"

    def pods_ready(self, obj: Obj) -> int:
        status = obj.get("status") or {}
        return int(status.get("ready", 0)) + int(status.get("succeeded", 0))

    def progress(self, obj: Obj) -> str:
        return pod_counts(obj.get("status") or {})

    def encode_affinities(self, affinities: list[Any]) -> str:
        """The one template's affinity itself (the annotation's format since Jobs came first)."""
        return json.dumps(affinities[0])

    def decode_affinities(self, text: str) -> list[Any]:
        return [json.loads(text)]

    def finished(self, obj: Obj) -> tuple[bool, str] | None:
        if _is_true(obj, "Failed"):
            return False, "the Job failed"
        if _is_true(obj, "Complete"):
            return True, "the Job completed"
        return None

    def start_time_patch(self, obj: Obj) -> Obj | None:
        """Kubernetes lets the pod template of a suspended Job change only while its
        `status.startTime` is unset; a Job that ran before keeps it, so it is cleared first,
        as Kueue does, or pinning fails with `spec.template: field is immutable`."""
        if not obj["spec"].get("suspend") or not (obj.get("status") or {}).get("startTime"):
            return None
        return {"status": {"startTime": None}}
