"""A plain Pod admitter queued: one pod set of one pod. It is only read through the
interface: a Pod cannot be suspended, so admitter gates it and deletes it to evict
(`admitter/controller/plain_pods.py`)."""

from __future__ import annotations

from typing import ClassVar

from admitter.jobs.batch_job import MAIN_POD_SET
from admitter.jobs.interface import PodSetInfo
from admitter.kube.objects import Obj


class PlainPod:
    api_version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "Pod"
    workload_prefix: ClassVar[str] = "pod"
    name_label: ClassVar[bool] = False

    def pod_sets(self, obj: Obj) -> list[PodSetInfo]:
        return [PodSetInfo(MAIN_POD_SET, 1, obj["spec"], ("spec",))]

    def finished(self, obj: Obj) -> tuple[bool, str] | None:
        phase = (obj.get("status") or {}).get("phase")
        if phase == "Succeeded":
            return True, "the Pod succeeded"
        if phase == "Failed":
            return False, "the Pod failed"
        return None
