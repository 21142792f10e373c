"""The Job webhooks, rule by rule, on AdmissionReview fixtures."""

import base64
import json

import pytest
from review_fixtures import (
    CONTROLLER,
    NAMESPACE,
    POLICY,
    SUSPEND_PATCH,
    FakeLookup,
    changed,
    job,
    request,
    standard_lookup,
)

from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION, QUEUE_LABEL
from admitter.webhook.jobs import (
    JobPolicy,
    mutate_job,
    validate_job,
)
from admitter.webhook.review import review_response

from builders.kube import cluster_queue, local_queue, topology

MIN_RUNTIME = "admitter.dev/min-runtime"
REQUIRED = "admitter.dev/topology-required"
LABEL_PATH = f"metadata.labels[{QUEUE_LABEL}]"


async def verdict_of(obj, old=None, user="alice", lookup=None):
    lookup = standard_lookup() if lookup is None else lookup
    return await validate_job(request(obj, old, user), lookup, POLICY)


async def denial(obj, old=None, user="alice", lookup=None) -> str:
    verdict = await verdict_of(obj, old, user, lookup)
    assert not verdict.allowed, "expected a denial"
    return verdict.message


def running(obj):
    return changed(obj, suspend=False)


# ---- mutating ----------------------------------------------------------------------------


async def mutation(obj, old=None, lookup=None):
    return await mutate_job(request(obj, old), lookup or standard_lookup(), POLICY)


async def test_mutation_suspends_a_labelled_job_on_create():
    verdict = await mutation(job(suspend=None, annotations={MIN_RUNTIME: "1h"}))
    assert verdict.allowed
    assert verdict.patch == SUSPEND_PATCH == [{"op": "add", "path": "/spec/suspend", "value": True}]
    response = review_response("uid-1", verdict)["response"]
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == SUSPEND_PATCH


async def test_mutation_overrides_an_explicit_suspend_false():
    assert (await mutation(job(suspend=False))).patch == SUSPEND_PATCH


@pytest.mark.parametrize(
    "obj, old",
    [
        (job(suspend=True), None),  # already suspended
        (job(queue=None), None),  # not queued
        (job(suspend=True), job(suspend=True)),  # updates are never mutated
    ],
)
async def test_mutation_leaves_other_jobs_alone(obj, old):
    verdict = await mutation(obj, old)
    assert verdict.allowed and verdict.patch == []


# ---- the queue label ---------------------------------------------------------------------


async def test_a_suspended_job_naming_an_existing_local_queue_is_allowed():
    assert (await verdict_of(job(suspend=True))).allowed


async def test_a_missing_local_queue_is_denied_naming_the_label_and_the_existing_queues():
    message = await denial(job(queue="nope", suspend=True))
    assert LABEL_PATH in message
    assert "LocalQueue 'nope' does not exist in namespace 'team-a'" in message
    assert "existing: default, shared" in message


async def test_a_namespace_without_local_queues_says_whom_to_ask():
    message = await denial(job(suspend=True), lookup=FakeLookup())
    assert "existing: none; ask an admin to create one" in message


async def test_moving_an_unadmitted_job_to_another_existing_queue_is_allowed():
    old = job(suspend=True)
    assert (await verdict_of(changed(old, labels={QUEUE_LABEL: "shared"}), old)).allowed


async def test_moving_an_unadmitted_job_to_a_missing_queue_is_denied():
    old = job(suspend=True)
    message = await denial(changed(old, labels={QUEUE_LABEL: "gone"}), old)
    assert "LocalQueue 'gone' does not exist" in message


@pytest.mark.parametrize(
    "admitted",
    [
        running(job()),
        changed(job(suspend=True), annotations={ADMITTED_WORKLOAD_ANNOTATION: "job-train"}),
    ],
    ids=["running", "marked-by-controller"],
)
async def test_relabelling_an_admitted_job_is_denied_naming_both_queues_and_the_fix(admitted):
    for user in ("alice", CONTROLLER):
        message = await denial(changed(admitted, labels={QUEUE_LABEL: "shared"}), admitted, user)
        assert LABEL_PATH in message
        assert "admitted to LocalQueue 'default' and cannot move to 'shared'" in message
        assert "set it back to 'default', or delete the Job and recreate it" in message


@pytest.mark.parametrize("old", [job(suspend=True), running(job())], ids=["pending", "running"])
async def test_removing_the_queue_label_is_denied(old):
    message = await denial(changed(old, labels={QUEUE_LABEL: None}), old)
    assert LABEL_PATH in message
    assert "cannot be removed" in message and "delete the Job instead" in message


async def test_a_running_unqueued_job_cannot_join_a_queue():
    old = running(job(queue=None))
    message = await denial(changed(old, labels={QUEUE_LABEL: "default"}), old)
    assert "already runs outside admitter" in message
    assert "recreate it with the label" in message


async def test_labelling_a_suspended_unqueued_job_queues_it():
    old = job(queue=None, suspend=True)
    assert (await verdict_of(changed(old, labels={QUEUE_LABEL: "default"}), old)).allowed


# ---- suspend -----------------------------------------------------------------------------


async def test_a_user_unsuspending_an_unadmitted_job_is_denied_naming_the_field_and_the_fix():
    old = job(suspend=True)
    message = await denial(running(old), old, user="alice")
    assert "spec.suspend: alice may not unsuspend a Job that admitter has not admitted" in message
    assert "keep spec.suspend true" in message
    assert "kubectl get workloads -n team-a" in message


async def test_creating_a_running_job_past_the_mutating_webhook_is_denied():
    message = await denial(job(suspend=False))
    assert "spec.suspend" in message


async def test_admitters_own_identity_may_unsuspend():
    old = job(suspend=True)
    new = changed(old, suspend=False, annotations={ADMITTED_WORKLOAD_ANNOTATION: "job-train"})
    assert (await verdict_of(new, old, user=CONTROLLER)).allowed


async def test_the_controller_identities_are_configurable():
    old = job(suspend=True)
    policy = JobPolicy(POLICY.max_min_runtime, frozenset({"robot"}))
    assert (await validate_job(request(running(old), old, "robot"), FakeLookup(), policy)).allowed
    denied = await validate_job(request(running(old), old, CONTROLLER), FakeLookup(), policy)
    assert not denied.allowed


async def test_a_job_the_controller_marked_admitted_may_be_resumed_by_its_user():
    old = changed(job(suspend=True), annotations={ADMITTED_WORKLOAD_ANNOTATION: "job-train"})
    assert (await verdict_of(running(old), old)).allowed


async def test_users_cannot_forge_or_remove_the_admitted_mark():
    path = f"metadata.annotations[{ADMITTED_WORKLOAD_ANNOTATION}]"
    forged = changed(job(suspend=True), annotations={ADMITTED_WORKLOAD_ANNOTATION: "x"})
    for new, old in ((forged, None), (forged, job(suspend=True)), (job(suspend=True), forged)):
        message = await denial(new, old)
        assert f"{path}: only admitter sets this annotation; remove your change" in message


async def test_suspending_again_is_always_allowed():
    old = running(job())
    assert (await verdict_of(changed(old, suspend=True), old)).allowed


# ---- the contract ------------------------------------------------------------------------


async def test_a_malformed_min_runtime_is_denied_with_the_expected_format():
    message = await denial(job(suspend=True, annotations={MIN_RUNTIME: "two hours"}))
    assert f"metadata.annotations: annotation {MIN_RUNTIME}" in message
    assert "expected e.g. 90s, 15m, 2h" in message


@pytest.mark.parametrize(
    "queue, asked, cap",
    [
        ("default", "3h", "2h"),  # team-a's own cap
        ("shared", "5h", "4h"),  # team-b inherits org's cap
    ],
)
async def test_min_runtime_above_the_nearest_cap_on_the_path_is_denied(queue, asked, cap):
    message = await denial(job(queue=queue, suspend=True, annotations={MIN_RUNTIME: asked}))
    assert f"above the queue's maxMinRuntime {cap}; ask for at most that" in message


async def test_min_runtime_up_to_the_cap_is_allowed():
    verdict = await verdict_of(job(queue="shared", suspend=True, annotations={MIN_RUNTIME: "4h"}))
    assert verdict.allowed


async def test_without_a_cap_on_the_path_the_settings_default_applies():
    lookup = FakeLookup([cluster_queue("solo"), local_queue("solo", namespace=NAMESPACE)])
    at_cap = job(suspend=True, annotations={MIN_RUNTIME: "8h"})
    assert (await verdict_of(at_cap, lookup=lookup)).allowed
    message = await denial(job(suspend=True, annotations={MIN_RUNTIME: "9h"}), lookup=lookup)
    assert "maxMinRuntime 8h" in message


async def test_an_unknown_topology_level_is_denied_listing_the_levels():
    message = await denial(job(suspend=True, annotations={REQUIRED: "zone"}))
    assert (
        f"annotation {REQUIRED}='zone' is not a topology level; use one of "
        "topology.admitter.dev/block, topology.admitter.dev/rack, kubernetes.io/hostname"
    ) in message


async def test_the_host_level_is_always_known():
    obj = job(suspend=True, annotations={REQUIRED: "kubernetes.io/hostname"})
    assert (await verdict_of(obj)).allowed


async def test_only_the_topology_the_controller_places_by_gives_levels():
    """The controller keeps one hierarchy, the first Topology's by name: a level of another
    would be accepted here and then never placed."""
    lookup = standard_lookup()
    lookup.objects.append(topology("pods", "example.com/pod"))
    message = await denial(job(suspend=True, annotations={REQUIRED: "example.com/pod"}),
                           lookup=lookup)
    assert "use one of topology.admitter.dev/block, topology.admitter.dev/rack, " \
        "kubernetes.io/hostname" in message
    lookup.objects.append(topology("a-first", "example.com/pod"))
    accepted = job(suspend=True, annotations={REQUIRED: "example.com/pod"})
    assert (await verdict_of(accepted, lookup=lookup)).allowed


async def test_a_topology_request_without_any_topology_is_denied():
    lookup = FakeLookup([cluster_queue("solo"), local_queue("solo", namespace=NAMESPACE)])
    message = await denial(job(suspend=True, annotations={REQUIRED: "rack"}), lookup=lookup)
    assert "the cluster defines no Topology" in message


async def test_updates_recheck_only_what_changed():
    """A cap lowered after admission must not block the controller's later updates."""
    admitted = running(job(annotations={MIN_RUNTIME: "6h", REQUIRED: "gone"}))
    lookup = standard_lookup()
    new = changed(admitted, annotations={"note": "x"})
    assert (await verdict_of(new, admitted, user=CONTROLLER, lookup=lookup)).allowed
    assert lookup.reads == []


async def test_a_changed_contract_is_rechecked():
    old = job(suspend=True)
    message = await denial(changed(old, annotations={MIN_RUNTIME: "3h"}), old)
    assert "maxMinRuntime 2h" in message


async def test_every_problem_is_reported_at_once():
    message = await denial(job(queue="nope", suspend=False, annotations={MIN_RUNTIME: "9h"}))
    assert message.startswith("Job team-a/train: 3 problem(s)")
    assert LABEL_PATH in message and "spec.suspend" in message and "maxMinRuntime 8h" in message


async def test_only_the_needed_objects_are_read():
    lookup = standard_lookup()
    await verdict_of(job(suspend=True), lookup=lookup)
    assert lookup.reads == ["LocalQueue", "ClusterQueue"]  # is any queue on the path closing?


@pytest.mark.parametrize("raw", ["-0", "1e-7", "inf", "nan", "-1s", "99999d", "٣s"])
async def test_a_min_runtime_the_workload_could_not_carry_is_denied(raw):
    message = await denial(job(suspend=True, annotations={MIN_RUNTIME: raw}))
    assert f"metadata.annotations: annotation {MIN_RUNTIME}: {raw!r}" in message


# ---- an admitted Job keeps the size it was charged for -------------------------------------


def resized(obj, parallelism=None, gpus=None):
    new = json.loads(json.dumps(obj))
    if parallelism is not None:  # as many completions: each of them runs at once
        new["spec"]["parallelism"] = new["spec"]["completions"] = parallelism
    if gpus is not None:
        container = new["spec"]["template"]["spec"]["containers"][0]
        container["resources"] = {"requests": {"nvidia.com/gpu": gpus}}
    return new


@pytest.mark.parametrize(
    "edit, field, said",
    [
        ({"parallelism": 10}, "spec.parallelism",
         "admitted with 2 pods in pod set 'main'; it cannot change to 10 while admitted"),
        ({"gpus": 8}, "spec.template.spec",
         "their requests cannot change to {'nvidia.com/gpu': '8'} while admitted"),
    ],
)
async def test_an_admitted_job_cannot_grow_past_what_it_was_charged(edit, field, said):
    admitted = resized(running(job(annotations={ADMITTED_WORKLOAD_ANNOTATION: "wl"})), gpus=1)
    message = await denial(resized(admitted, **edit), admitted)
    assert f"{field}: the Job is admitted" in message and said in message
    assert "delete the Job and create it again with the new size" in message


async def test_a_queued_job_may_change_size_and_the_controller_is_not_bound():
    queued = job(suspend=True)
    assert (await verdict_of(resized(queued, parallelism=10), queued)).allowed
    admitted = running(job(annotations={ADMITTED_WORKLOAD_ANNOTATION: "wl"}))
    assert (await verdict_of(resized(admitted, parallelism=10), admitted, CONTROLLER)).allowed


@pytest.mark.parametrize("memory", ["500m", "1.5"])
async def test_fractional_bytes_are_accepted_as_kubernetes_accepts_them(memory):
    """The API server takes memory `500m` (with a warning) and kube-scheduler rounds it up to
    a whole byte; the controller counts it the same way, so the Job need not be refused."""
    queued = job(suspend=True)
    queued["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"memory": memory, "cpu": "500m"}}
    assert (await verdict_of(queued)).allowed


async def test_more_pods_than_a_workload_holds_are_denied():
    huge = job(suspend=True)
    huge["spec"]["parallelism"] = huge["spec"]["completions"] = 100_001
    assert "spec.parallelism: 100001 pods is more than a Workload holds (100000)" in (
        await denial(huge))
