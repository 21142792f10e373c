"""What the tests that drive a job kind through its real operator share: the Workload fields
the controller's writes read, and the job as the API server has it now."""

from __future__ import annotations

from admitter_world import workloads

from admitter.controller.actions import resource_of
from admitter.controller.kube import Kube, Obj
from admitter.jobs.registry import job_of
from admitter.testing import RACK_LABEL

GPU = "nvidia.com/gpu"


def admitted_to(rack: str, workload: str) -> Obj:
    """The Workload fields the writes read: its name and the admitted domain."""
    return {"metadata": {"name": workload},
            "status": {"admission": {"topologyDomain": {RACK_LABEL: rack}}}}


async def read(api: Kube, job: Obj) -> Obj:
    """The job as it is now, of whichever kind it is."""
    return await api.get(resource_of(job_of(job)), job["metadata"]["name"],
                         job["metadata"]["namespace"])


async def workload_of(api: Kube, job: Obj) -> Obj | None:
    """The Workload the controller made for `job` (owned by it), if any yet."""
    listed = await workloads(api, job["metadata"]["namespace"])
    return next((wl for wl in listed
                 if any(owner.get("uid") == job["metadata"]["uid"]
                        for owner in wl["metadata"].get("ownerReferences") or ())), None)
