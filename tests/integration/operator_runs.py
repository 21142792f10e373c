"""What the tests that drive a job kind through its real operator share: the Workload fields
the controller's writes read, and the job as the API server has it now."""

from __future__ import annotations

from admitter_world import workloads
from kubernetes_asyncio.client import ApiClient, RbacAuthorizationV1Api

from admitter.api.workload import CONDITION_FINISHED, Reason
from admitter.controller import kube
from admitter.controller.actions import resource_of
from admitter.controller.kube import Kube, Obj
from admitter.controller.translate import condition, is_true
from admitter.jobs.registry import job_of
from admitter.testing import RACK_LABEL
from admitter.testing.waiting import eventually

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


async def alice_may_edit(kube_client: ApiClient, namespace: str, group: str, plural: str) -> None:
    """A Role letting the user `alice` do anything to `plural` in the namespace, as a
    researcher's edit rights do: her requests go through admitter's webhooks."""
    rbac = RbacAuthorizationV1Api(kube_client)
    await rbac.create_namespaced_role(namespace, {
        "metadata": {"name": f"{plural}-editor"},
        "rules": [{"apiGroups": [group], "resources": [plural], "verbs": ["*"]}]})
    await rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": f"alice-edits-{plural}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": f"{plural}-editor"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": "alice"}]})


async def finished_and_released(api: Kube, job: Obj, what: str) -> None:
    """Wait until the job's Workload is Finished as Succeeded, its quota released."""
    async def finished() -> Obj | None:
        wl = await workload_of(api, job)
        return wl if wl is not None and is_true(wl, CONDITION_FINISHED) else None

    wl = await eventually(finished, f"{what}'s Workload finished", timeout=120.0)
    assert not wl["status"].get("admission"), "its quota released"
    assert condition(wl, CONDITION_FINISHED)["reason"] == Reason.SUCCEEDED


async def delete_all(api: Kube, namespace: str, *kinds: kube.Kind) -> None:
    """Delete every object of `kinds` in the namespace and wait until its pods are gone,
    so later tests find the nodes free."""
    for kind in kinds:
        await api.request("DELETE", kind.path(namespace), {"propagationPolicy": "Background"})

    async def no_pods() -> bool:
        listed = await api.request("GET", kube.PODS.path(namespace))
        return not listed["items"]

    await eventually(no_pods, "the test's pods gone", timeout=90.0)
