"""Unlabelled work in the namespaces `unlabelledWork` selects: Jobs get the default queue and
start suspended, plain GPU Pods are gated; everything elsewhere is left as it was."""

import copy
from dataclasses import replace

import pytest
from review_fixtures import (
    CONTROLLER,
    NAMESPACE,
    POLICY,
    changed,
    job,
    request,
    standard_lookup,
)

from admitter.api.contract import QUEUE_LABEL
from admitter.api.settings import Settings
from admitter.jobs.rayjob import POD_LABEL
from admitter.kube.objects import ADMISSION_GATE
from admitter.webhook.jobs import mutate_job
from admitter.webhook.pods import mutate_pod, validate_pod

OPTED_IN = Settings.model_validate({"unlabelledWork": {
    "namespaceSelector": {"matchLabels": {"admitter.dev/quota": "enforced"}}}}).unlabelled_work
OPT_IN_POLICY = replace(POLICY, unlabelled=OPTED_IN)
GATE = {"name": ADMISSION_GATE}


def namespace(name: str, **labels: str) -> dict:
    return {"kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def lookup(*namespaces: dict):
    found = standard_lookup()
    found.objects += namespaces or [namespace(NAMESPACE, **{"admitter.dev/quota": "enforced"})]
    return found


def pod(gpus: int = 1, owner: str | None = None, queue: str | None = None, **spec) -> dict:
    container = {"name": "main", "image": "cuda",
                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
    metadata: dict = {"name": "notebook", "namespace": NAMESPACE}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": owner, "name": "x",
                                        "uid": "u"}]
    if queue:
        metadata["labels"] = {QUEUE_LABEL: queue}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"containers": [container], **spec}}


def patched(obj: dict, patch: list[dict]) -> dict:
    """`obj` with a JSON patch of `add` operations applied."""
    out = copy.deepcopy(obj)
    for op in patch:
        assert op["op"] == "add"
        *parents, last = [p.replace("~1", "/").replace("~0", "~")
                          for p in op["path"].split("/")[1:]]
        target = out
        for part in parents:
            target = target[part]
        if last == "-":
            target.append(op["value"])
        else:
            target[last] = op["value"]
    return out


async def test_an_unlabelled_job_in_a_selected_namespace_is_queued_in_the_default_queue():
    unlabelled = job(queue=None)
    verdict = await mutate_job(request(unlabelled), lookup(), OPT_IN_POLICY)
    result = patched(unlabelled, verdict.patch)
    assert result["metadata"]["labels"] == {QUEUE_LABEL: "default"}
    assert result["spec"]["suspend"] is True


@pytest.mark.parametrize("policy, namespaces", [
    (POLICY, [namespace(NAMESPACE, **{"admitter.dev/quota": "enforced"})]),  # not opted in
    (OPT_IN_POLICY, [namespace(NAMESPACE, **{"admitter.dev/quota": "off"})]),  # not selected
])
async def test_unlabelled_work_elsewhere_is_left_alone(policy, namespaces):
    assert (await mutate_job(request(job(queue=None)), lookup(*namespaces), policy)).patch == []
    assert (await mutate_pod(request(pod()), lookup(*namespaces), policy)).patch == []


async def test_a_selected_namespace_without_its_default_queue_rejects_unlabelled_work():
    work = OPTED_IN.model_copy(update={"local_queue": "absent"})
    for obj, mutate in ((job(queue=None), mutate_job), (pod(), mutate_pod)):
        verdict = await mutate(request(obj), lookup(), replace(POLICY, unlabelled=work))
        assert not verdict.allowed
        assert "LocalQueue 'absent', which does not exist; ask an admin" in verdict.message


async def test_a_plain_gpu_pod_is_gated_and_labelled_with_its_queue():
    for given, queue in ((pod(), "default"), (pod(queue="shared"), "shared")):
        verdict = await mutate_pod(request(given), lookup(), OPT_IN_POLICY)
        result = patched(given, verdict.patch)
        assert result["spec"]["schedulingGates"] == [GATE]
        assert result["metadata"]["labels"][QUEUE_LABEL] == queue
    other_gate = pod(schedulingGates=[{"name": "example.com/other"}])
    verdict = await mutate_pod(request(other_gate), lookup(), OPT_IN_POLICY)
    assert patched(other_gate, verdict.patch)["spec"]["schedulingGates"] == [
        {"name": "example.com/other"}, GATE]


def ray_worker() -> dict:
    """A queued RayJob's worker as KubeRay makes it: owned by its RayCluster, named by the
    label admitter put on the RayJob's templates."""
    made = pod(owner="RayCluster")
    made["metadata"]["labels"] = {POD_LABEL: "tune", "ray.io/cluster": "tune-x7k2p"}
    return made


@pytest.mark.parametrize("given", [pod(gpus=0), pod(owner="Job"), ray_worker()])
async def test_pods_of_jobs_and_pods_without_gpus_are_left_alone(given):
    assert (await mutate_pod(request(given), lookup(), OPT_IN_POLICY)).patch == []


async def test_a_pod_bound_to_a_node_by_name_is_rejected_naming_the_field():
    verdict = await mutate_pod(request(pod(nodeName="gpu-0")), lookup(), OPT_IN_POLICY)
    assert not verdict.allowed and "spec.nodeName: 'gpu-0' binds the Pod" in verdict.message


async def test_a_pod_with_a_bad_contract_is_rejected():
    bad = pod()
    bad["metadata"]["annotations"] = {"admitter.dev/min-runtime": "forever"}
    verdict = await mutate_pod(request(bad), lookup(), OPT_IN_POLICY)
    assert not verdict.allowed and "metadata.annotations" in verdict.message


def test_only_admitter_lifts_the_gate_or_moves_a_gated_pod():
    gated = pod(queue="default", schedulingGates=[GATE])
    lifted = copy.deepcopy(gated)
    lifted["spec"]["schedulingGates"] = []
    moved = changed(gated, labels={QUEUE_LABEL: "shared"})
    for new, said in ((lifted, "only admitter removes the admitter.dev/admission gate"),
                      (moved, "stays in LocalQueue 'default'")):
        verdict = validate_pod(request(new, gated), OPT_IN_POLICY)
        assert not verdict.allowed and said in verdict.message
    assert validate_pod(request(lifted, gated, CONTROLLER), OPT_IN_POLICY).allowed
    marked = changed(lifted, annotations={"admitter.dev/admitted-workload": "pod-x"})
    assert not validate_pod(request(marked, lifted), OPT_IN_POLICY).allowed
    assert validate_pod(request(changed(lifted, labels={"app": "x"}), lifted),
                        OPT_IN_POLICY).allowed


def test_the_unlabelled_webhooks_are_registered_only_for_the_selected_namespaces():
    from admitter.webhook.registration import url_client_config, webhook_configurations

    plain = webhook_configurations(url_client_config("h:1", b"ca"))
    opted = webhook_configurations(url_client_config("h:1", b"ca"), OPTED_IN)
    added = [hook for configuration, before in zip(opted, plain, strict=True)
             for hook in configuration["webhooks"][len(before["webhooks"]):]]
    assert [hook["name"] for hook in added] == [
        "mutate-unlabelled-jobs.admitter.dev", "mutate-pods.admitter.dev",
        "validate-pods.admitter.dev"]
    for hook in added:
        assert hook["namespaceSelector"] == OPTED_IN.webhook_namespace_selector()
        assert hook["failurePolicy"] == "Fail"
    assert all("namespaceSelector" not in hook
               for configuration in plain for hook in configuration["webhooks"])
