"""JobSet through admitter's job interface against the real JobSet controller: the writes the
controller makes for an admission (pin every pod set to the admitted domain, unsuspend), an
eviction (suspend) and the return to pending (restore the user's own placement), and what JobSet's
controller and kube-scheduler then do with the pods."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from operator_runs import GPU, admitted_to, read

from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION, ORIGINAL_AFFINITY_ANNOTATION
from admitter.controller.actions import Actions, resource_of
from admitter.controller.kube import Kube, Obj
from admitter.jobs.jobset import JobSet
from admitter.testing import LocalCluster
from admitter.testing.jobset_operator import running_jobset_operator
from admitter.testing.waiting import eventually

pytestmark = pytest.mark.integration
JOBSETS = resource_of(JobSet())
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
WORKLOAD = "jobset-train-0a1b2"


@pytest.fixture(scope="module")
def jobset_operator(local_cluster: LocalCluster,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with running_jobset_operator(local_cluster, tmp_path_factory.mktemp("jobset")):
        yield


def pod_template(gpus: int) -> Obj:
    return {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "trainer", "resources": {"limits": {GPU: str(gpus)}}}]}}


def leader_and_workers(namespace: str) -> Obj:
    """1 leader + 2 × 4 workers, suspended as admitter's webhook leaves a queued JobSet."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": f"train-{secrets.token_hex(3)}", "namespace": namespace},
        "spec": {"suspend": True, "replicatedJobs": [
            {"name": "leader", "replicas": 1,
             "template": {"spec": {"parallelism": 1, "completions": 1,
                                   "template": pod_template(1)}}},
            {"name": "workers", "replicas": 2,
             "template": {"spec": {"parallelism": 4, "completions": 4,
                                   "template": pod_template(1)}}},
        ]},
    }


async def bound_pods(api: Kube, js: Obj) -> dict[str, str] | None:
    """Pod → node of the JobSet's live pods, once all 9 are bound."""
    listed = await api.request("GET", f"/api/v1/namespaces/{js['metadata']['namespace']}/pods",
                               query={"labelSelector": f"{NAME_LABEL}={js['metadata']['name']}"})
    live = [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in live}
    return nodes if len(nodes) == 9 and all(nodes.values()) else None


async def live_pods(api: Kube, js: Obj) -> int:
    listed = await api.request("GET", f"/api/v1/namespaces/{js['metadata']['namespace']}/pods",
                               query={"labelSelector": f"{NAME_LABEL}={js['metadata']['name']}"})
    return sum(1 for p in listed["items"] if not p["metadata"].get("deletionTimestamp"))


async def test_a_jobset_runs_in_the_admitted_rack_and_again_in_another_after_an_eviction(
        jobset_operator: None, api: Kube, namespace: str, local_cluster: LocalCluster) -> None:
    racks = {node: rack for rack in ("rack-1", "rack-2")
             for node in local_cluster.layout.nodes_in_rack(rack)}
    actions = Actions(api)
    js = await api.create(JOBSETS, leader_and_workers(namespace))

    selector = f"{NAME_LABEL}={js['metadata']['name']}"

    async def child_jobs_suspended() -> bool:
        listed = await api.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs",
                                   query={"labelSelector": selector})
        return len(listed["items"]) == 3 and all(j["spec"].get("suspend")
                                                 for j in listed["items"])

    await eventually(child_jobs_suspended, "JobSet's controller makes 3 suspended child Jobs")
    assert await live_pods(api, js) == 0

    await actions.start_job(await read(api, js), admitted_to("rack-1", WORKLOAD))
    placed = await eventually(lambda: bound_pods(api, js), "9 pods bound", timeout=60.0)
    assert {racks.get(node) for node in placed.values()} == {"rack-1"}

    # Evicted: suspended, its pods go; back to pending: the user's own (no) affinity again.
    await actions.suspend_job(await read(api, js))

    async def no_pods() -> bool:
        return await live_pods(api, js) == 0

    await eventually(no_pods, "the suspended JobSet's pods deleted", timeout=60.0)
    restored = await actions.restore_job(await read(api, js))
    assert restored["spec"]["suspend"] is True
    for replicated in restored["spec"]["replicatedJobs"]:
        assert "nodeSelector" not in replicated["template"]["spec"]["template"]["spec"]
    marks = restored["metadata"].get("annotations") or {}
    assert ADMITTED_WORKLOAD_ANNOTATION not in marks and ORIGINAL_AFFINITY_ANNOTATION not in marks

    await actions.start_job(await read(api, js), admitted_to("rack-2", WORKLOAD))
    placed = await eventually(lambda: bound_pods(api, js), "9 pods bound again", timeout=60.0)
    assert {racks.get(node) for node in placed.values()} == {"rack-2"}
