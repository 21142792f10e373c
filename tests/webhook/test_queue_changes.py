"""The Job webhooks and the queue's life: defaults written onto new Jobs, moves of a Job whose
Workload was just admitted, and queues being deleted."""

from __future__ import annotations

import pytest
from review_fixtures import (
    NAMESPACE,
    SUSPEND_PATCH,
    FakeLookup,
    changed,
    job,
    request,
    standard_lookup,
)

from admitter.api.contract import QUEUE_LABEL
from admitter.jobs.workloads import workload_name
from admitter.webhook.jobs import JobPolicy, mutate_job, validate_job
from admitter.webhook.review import review_response

from builders.kube import cluster_queue, local_queue

POLICY = JobPolicy(max_min_runtime=8 * 3600.0, controller_usernames=frozenset({"admitter"}))
MIN_RUNTIME = "admitter.dev/min-runtime"
ANNOTATION_PATH = "/metadata/annotations/admitter.dev~1min-runtime"
DELETING = {"deletionTimestamp": "2026-12-01T12:00:00Z"}


def with_defaults(leaf_default: str | None, org_default: str | None = None) -> FakeLookup:
    """org (cap 4h) → team-a (cap 2h); LocalQueue `default` → team-a."""
    return FakeLookup([
        cluster_queue("org", maxMinRuntime="4h", defaultMinRuntime=org_default),
        cluster_queue("team-a", parent="org", maxMinRuntime="2h",
                      defaultMinRuntime=leaf_default),
        local_queue("team-a", namespace=NAMESPACE),
    ])


async def mutated(obj, lookup):
    verdict = await mutate_job(request(obj), lookup, POLICY)
    assert verdict.allowed
    return verdict.patch


async def test_a_job_without_min_runtime_gets_its_queues_default_written_on_it():
    patch = await mutated(job(suspend=True), with_defaults("30m"))
    assert patch == [{"op": "add", "path": "/metadata/annotations",
                      "value": {MIN_RUNTIME: "30m"}}]


async def test_the_default_is_inherited_and_capped_by_the_effective_max():
    patch = await mutated(job(suspend=False, annotations={"team": "x"}), with_defaults(None, "3h"))
    assert patch == [*SUSPEND_PATCH, {"op": "add", "path": ANNOTATION_PATH, "value": "2h"}]


@pytest.mark.parametrize("obj, lookup", [
    (job(suspend=True, annotations={MIN_RUNTIME: "0"}), with_defaults("30m")),  # declared
    (job(suspend=True), with_defaults(None)),  # no default anywhere
    (job(queue="missing", suspend=True), with_defaults("30m")),  # validation says why
])
async def test_no_default_is_written_when_the_job_declares_one_or_none_applies(obj, lookup):
    assert await mutated(obj, lookup) == []


MAX_RUNTIME = "admitter.dev/max-runtime"


def with_max_runtime(default: str, ceiling: str | None = None) -> FakeLookup:
    """org (defaultMaxRuntime `default`) → team-a (maxRuntimeCeiling `ceiling`)."""
    return FakeLookup([
        cluster_queue("org", defaultMaxRuntime=default),
        cluster_queue("team-a", parent="org", maxRuntimeCeiling=ceiling),
        local_queue("team-a", namespace=NAMESPACE),
    ])


async def test_a_job_without_a_maximum_gets_its_queues_default_capped_by_the_ceiling():
    assert await mutated(job(suspend=True), with_max_runtime("12h", "8h")) == [
        {"op": "add", "path": "/metadata/annotations", "value": {MAX_RUNTIME: "8h"}}]


async def test_both_defaults_are_written_in_one_map_when_the_job_has_no_annotations():
    lookup = FakeLookup([
        cluster_queue("org", defaultMaxRuntime="1d"),
        cluster_queue("team-a", parent="org", defaultMinRuntime="30m"),
        local_queue("team-a", namespace=NAMESPACE),
    ])
    assert await mutated(job(suspend=True), lookup) == [
        {"op": "add", "path": "/metadata/annotations",
         "value": {MIN_RUNTIME: "30m", MAX_RUNTIME: "1d"}}]


async def test_a_declared_maximum_is_kept():
    declared = job(suspend=True, annotations={MAX_RUNTIME: "1h"})
    assert await mutated(declared, with_max_runtime("12h")) == []


async def test_a_maximum_above_the_queues_ceiling_is_refused_at_creation():
    verdict = await validate_job(request(job(suspend=True, annotations={MAX_RUNTIME: "9h"})),
                                 with_max_runtime("1h", "8h"), POLICY)
    assert not verdict.allowed
    assert ("metadata.annotations: annotation admitter.dev/max-runtime='9h' is above the "
            "queue's maxRuntimeCeiling 8h; ask for at most that") in verdict.message


def admitted_workload(old: dict, cluster_queue_name: str = "team-a") -> dict:
    return {"kind": "Workload", "metadata": {"name": workload_name(old), "namespace": NAMESPACE},
            "status": {"admission": {"clusterQueue": cluster_queue_name}}}


async def test_moving_a_suspended_job_whose_workload_was_just_admitted_is_denied():
    old = job(suspend=True)
    old["metadata"]["uid"] = "0d5c"
    lookup = standard_lookup()
    moved = changed(old, labels={QUEUE_LABEL: "shared"})
    assert (await validate_job(request(moved, old), lookup, POLICY)).allowed
    lookup.objects.append(admitted_workload(old))
    verdict = await validate_job(request(moved, old), lookup, POLICY)
    assert not verdict.allowed
    assert f"Workload {workload_name(old)} is admitted to LocalQueue 'default'" in verdict.message
    assert "cannot move to 'shared'" in verdict.message


def deleting(obj: dict) -> dict:
    obj["metadata"].update(DELETING)
    return obj


@pytest.mark.parametrize("objects, says", [
    ([cluster_queue("team-a"), deleting(local_queue("team-a", namespace=NAMESPACE))],
     "LocalQueue 'default' is being deleted"),
    ([deleting(cluster_queue("team-a")), local_queue("team-a", namespace=NAMESPACE)],
     "LocalQueue 'default' feeds ClusterQueue 'team-a', which is being deleted"),
    ([deleting(cluster_queue("org")), cluster_queue("team-a", parent="org"),
      local_queue("team-a", namespace=NAMESPACE)],
     "LocalQueue 'default' feeds ClusterQueue 'org', which is being deleted"),
], ids=["local-queue", "cluster-queue", "ancestor"])
async def test_new_jobs_to_a_queue_being_deleted_are_denied_with_the_reason(objects, says):
    verdict = await validate_job(request(job(suspend=True)), FakeLookup(objects), POLICY)
    assert not verdict.allowed
    assert f"metadata.labels[{QUEUE_LABEL}]: {says}" in verdict.message


async def test_a_local_queue_whose_cluster_queue_is_missing_is_left_to_the_controller():
    lookup = FakeLookup([local_queue("team-a", namespace=NAMESPACE)])  # its reason: QueueClosed
    assert (await validate_job(request(job(suspend=True)), lookup, POLICY)).allowed


async def test_jobs_already_in_a_queue_being_deleted_may_still_change():
    lookup = FakeLookup([deleting(cluster_queue("team-a")),
                         local_queue("team-a", namespace=NAMESPACE)])
    old = job(suspend=True)
    new = changed(old, annotations={MIN_RUNTIME: "1h"})
    assert (await validate_job(request(new, old), lookup, POLICY)).allowed


def prioritised(priority_class: str) -> dict:
    obj = job(suspend=True, annotations={MIN_RUNTIME: "1h"})
    obj["spec"]["template"]["spec"]["priorityClassName"] = priority_class
    return obj


def with_priority_classes() -> FakeLookup:
    lookup = standard_lookup()
    for name, value in (("kueue-high", 10000), ("team-low", 10)):
        lookup.objects.append({"kind": "PriorityClass", "metadata": {"name": name},
                               "value": value})
    return lookup


async def test_a_job_whose_priority_is_never_preempted_is_warned_at_creation():
    verdict = await validate_job(request(prioritised("kueue-high")), with_priority_classes(),
                                 POLICY)
    assert verdict.allowed
    [warning] = verdict.warnings
    assert "PriorityClass 'kueue-high' has value 10000, at or above nonPreemptiblePriority " \
           "100" in warning and "never preempted" in warning
    assert review_response("u", verdict)["response"]["warnings"] == [warning]


@pytest.mark.parametrize("priority_class, threshold", [
    ("team-low", 100), ("kueue-high", None), ("kueue-high", 100_000), ("absent", 100)])
async def test_no_warning_below_the_threshold_or_without_one(priority_class, threshold):
    policy = JobPolicy(POLICY.max_min_runtime, POLICY.controller_usernames, threshold)
    verdict = await validate_job(request(prioritised(priority_class)), with_priority_classes(),
                                 policy)
    assert verdict.allowed and verdict.warnings == []
