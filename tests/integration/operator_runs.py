"""What the tests that drive a job kind through its real operator share: the Workload fields
the controller's writes read, the job as the API server has it now, a user allowed to edit
the kind, its pods checked against the nodes its admission counted, and a namespace cleared
of jobs after a test."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable

import pytest
from admitter_world import workloads
from kubernetes_asyncio.client import ApiClient, CustomObjectsApi, RbacAuthorizationV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.workload import CONDITION_FINISHED, Reason
from admitter.jobs.interface import LabelsPods
from admitter.jobs.registry import job_of
from admitter.jobs.workloads import pod_set_of, resource_of
from admitter.kube import client as kube
from admitter.kube.client import Kind, Kube
from admitter.kube.objects import Obj, condition, is_true, pinned_host, pod_requests
from admitter.testing import RACK_LABEL
from admitter.testing.waiting import eventually

GPU = "nvidia.com/gpu"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


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


async def placed_as_counted(api: Kube, job: Obj, pods: list[Obj]) -> None:
    """Each of the job's bound `pods` on the node admitter pinned it to, and as many pods of
    each pod set on each node as the admission of its Workload counted there (its node
    hints)."""
    wl = await workload_of(api, job)
    assert wl is not None, f"no Workload for {job['metadata']['name']}"
    hinted = Counter({(hint["podSet"], hint["node"]): hint["count"]
                      for hint in wl["status"]["admission"]["nodeHints"]})
    pins = {p["metadata"]["name"]: (pinned_host(p), p["spec"]["nodeName"]) for p in pods}
    assert all(pinned == bound for pinned, bound in pins.values()), pins
    assert Counter((pod_set_of(p), p["spec"]["nodeName"]) for p in pods) == hinted, hinted


UNSUSPEND = [{"op": "replace", "path": "/spec/suspend", "value": False}]


class UserJobs:
    """A user's requests on one kind of job in one namespace, through the API server and so
    through admitter's webhooks (`users_jobs` makes it)."""

    def __init__(self, user_client: ApiClient, kind: Kind, namespace: str) -> None:
        self.api = CustomObjectsApi(user_client)
        self.kind, self.namespace = kind, namespace
        self.group, self.version = kind.group_version.split("/")

    async def create(self, body: Obj) -> Obj:
        made: Obj = await self.api.create_namespaced_custom_object(
            self.group, self.version, self.namespace, self.kind.plural, body)
        return made

    async def patch(self, name: str, ops: list[Obj]) -> Obj:
        patched: Obj = await self.api.patch_namespaced_custom_object(
            self.group, self.version, self.namespace, self.kind.plural, name, ops)
        return patched

    @staticmethod
    async def refused(request: Awaitable[Obj]) -> str:
        """The message of the API server's refusal of `request`."""
        with pytest.raises(ApiException) as error:
            await request
        return str(json.loads(error.value.body)["message"])


async def users_jobs(kube_client: ApiClient, user_client: ApiClient, namespace: str,
                     kind: Kind, user: str = "alice") -> UserJobs:
    """`user` (whom `user_client` authenticates) allowed anything on jobs of `kind` in
    `namespace`, and their requests."""
    group, resource = kind.group_version.split("/")[0], kind.plural
    rbac = RbacAuthorizationV1Api(kube_client)
    await rbac.create_namespaced_role(namespace, {
        "metadata": {"name": f"{resource}-editor"},
        "rules": [{"apiGroups": [group], "resources": [resource], "verbs": ["*"]}]})
    await rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": f"{user}-edits-{resource}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": f"{resource}-editor"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})
    return UserJobs(user_client, kind, namespace)


async def finished_and_released(api: Kube, job: Obj, what: str,
                                reason: str = Reason.SUCCEEDED) -> None:
    """Wait until the job's Workload is Finished for `reason`, its quota released."""
    async def finished() -> Obj | None:
        wl = await workload_of(api, job)
        return wl if wl is not None and is_true(wl, CONDITION_FINISHED) else None

    wl = await eventually(finished, f"{what}'s Workload finished", timeout=120.0)
    assert not wl["status"].get("admission"), "its quota released"
    assert condition(wl, CONDITION_FINISHED)["reason"] == reason


async def clear(api: Kube, namespace: str, *kinds: Kind) -> None:
    """Delete every job of `kinds` in `namespace` and wait for its pods to be gone, so later
    tests find the nodes free."""
    for kind in kinds:
        await api.request("DELETE", kind.path(namespace), {"propagationPolicy": "Background"})

    async def no_pods() -> bool:
        listed = await api.request("GET", kube.PODS.path(namespace))
        return not listed["items"]

    await eventually(no_pods, "the test's pods gone", timeout=90.0)


def charged_gpus(wl: Obj) -> int:
    """The GPUs a Workload is charged for: pods × GPUs per pod, over its pod sets."""
    return sum(int(pod_set["count"]) * int(pod_set.get("requests", {}).get(GPU, 0))
               for pod_set in wl["spec"]["podSets"])


async def live_pods(api: Kube, job: Obj) -> list[Obj]:
    """The job's pods not done nor going, found by the label naming their job."""
    kind = job_of(job)
    label = kind.pod_label if isinstance(kind, LabelsPods) else JOB_NAME_LABEL
    listed = await api.request("GET", kube.PODS.path(job["metadata"]["namespace"]), query={
        "labelSelector": f"{label}={job['metadata']['name']}"})
    return [pod for pod in listed["items"] if not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]


async def holds_what_it_is_charged(api: Kube, job: Obj, what: str) -> int:
    """Wait until every live pod of the job runs on a node and together they hold the GPUs
    its admitted Workload is charged (a pod set that ran before, an initializer, is done);
    the GPUs."""
    async def held_as_charged() -> int | None:
        wl = await workload_of(api, job)
        if wl is None or not (wl.get("status") or {}).get("admission"):
            return None
        pods = await live_pods(api, job)
        if not all(pod["spec"].get("nodeName") and pod["status"].get("phase") == "Running"
                   for pod in pods):
            return None
        held = sum(int(pod_requests(pod["spec"]).get(GPU, 0)) for pod in pods)
        return held if held == charged_gpus(wl) else None

    return await eventually(held_as_charged, f"{what}'s running pods holding the GPUs its "
                            "Workload is charged", timeout=120.0)
