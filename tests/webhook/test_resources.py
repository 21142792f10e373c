"""Validation of ClusterQueues, LocalQueues and Topologies on AdmissionReview fixtures."""

import copy

import pytest
from review_fixtures import (
    FakeLookup,
    cluster_queue,
    local_queue,
    request,
    standard_lookup,
    topology,
)

from admitter.webhook.resources import validate_resource


async def denial(obj, old=None, lookup=None) -> str:
    verdict = await validate_resource(request(obj, old), lookup or standard_lookup())
    assert not verdict.allowed, "expected a denial"
    assert verdict.code == 422
    return verdict.message


async def allowed(obj, old=None, lookup=None) -> bool:
    return (await validate_resource(request(obj, old), lookup or standard_lookup())).allowed


# ---- the models --------------------------------------------------------------------------


async def test_model_errors_carry_field_paths_and_values():
    queue = cluster_queue("team-c", parent="research")
    queue["spec"]["resources"]["nvidia.com/gpu"] = {"quota": 8, "limit": 4}
    queue["spec"]["colour"] = "blue"
    message = await denial(queue)
    assert message.startswith("ClusterQueue team-c: 2 problem(s)")
    assert "spec.resources.nvidia.com/gpu: limit 4 is below quota 8" in message
    assert "spec.colour: unknown key" in message


async def test_a_bad_duration_names_its_field():
    message = await denial(cluster_queue("team-c", parent="org", max_min_runtime="soon"))
    assert "spec.maxMinRuntime: 'soon' is not a duration (expected e.g. 90s" in message


async def test_a_topology_with_a_repeated_level_is_denied():
    message = await denial(topology("t", "rack", "rack"))
    assert "spec.levels: node label 'rack' appears twice" in message


async def test_a_topology_without_levels_is_denied():
    assert "spec.levels" in await denial(topology("t"))


async def test_a_local_queue_without_its_cluster_queue_field_is_denied():
    queue = local_queue("q", "team-a")
    del queue["spec"]["clusterQueue"]
    assert "spec.clusterQueue: Field required" in await denial(queue)


# ---- ClusterQueue parents ----------------------------------------------------------------


async def test_a_new_queue_under_an_existing_parent_is_allowed():
    assert await allowed(cluster_queue("team-c", parent="research"))


async def test_a_new_child_of_a_leaf_that_has_local_queues_is_allowed():
    assert await allowed(cluster_queue("team-a-sub", parent="team-a"))


async def test_an_unknown_parent_is_denied_with_the_fix():
    message = await denial(cluster_queue("team-c", parent="nope"))
    assert "spec.parent: ClusterQueue 'nope' does not exist; create the parent first" in message


@pytest.mark.parametrize(
    "name, parent, cycle",
    [
        ("org", "team-a", "org -> team-a -> research -> org"),
        ("research", "research", "research -> research"),
    ],
)
async def test_a_parent_cycle_is_denied_naming_the_cycle(name, parent, cycle):
    old = cluster_queue(name, parent=None if name == "org" else "org")
    message = await denial(cluster_queue(name, parent=parent), old)
    assert f"spec.parent: {parent!r} would close the parent cycle {cycle}" in message
    assert f"choose a parent that is not below {name!r}" in message


async def test_an_unchanged_parent_is_not_rechecked():
    """Edits of a child whose parent was deleted later must still go through."""
    lookup = FakeLookup([cluster_queue("orphan", parent="deleted")])
    old = cluster_queue("orphan", parent="deleted")
    new = copy.deepcopy(old)
    new["spec"]["priority"] = 3
    assert await allowed(new, old, lookup)
    assert lookup.reads == []


# ---- LocalQueue targets ------------------------------------------------------------------


async def test_a_local_queue_on_a_leaf_is_allowed():
    assert await allowed(local_queue("q", "team-b"))


async def test_a_local_queue_on_a_missing_cluster_queue_is_denied_listing_leaves():
    message = await denial(local_queue("q", "nope"))
    assert (
        "spec.clusterQueue: ClusterQueue 'nope' does not exist; name a leaf ClusterQueue "
        "(existing leaves: team-a, team-b)"
    ) in message


async def test_a_local_queue_on_a_parent_is_denied_naming_its_children():
    message = await denial(local_queue("q", "research"))
    assert "ClusterQueue 'research' is a parent queue (children: team-a, team-b)" in message
    assert "name a leaf ClusterQueue instead" in message


async def test_retargeting_a_local_queue_is_checked_but_other_edits_are_not():
    old = local_queue("q", "team-a")
    assert "is a parent queue" in await denial(local_queue("q", "org"), old)
    lookup = FakeLookup()
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert await allowed(relabelled, old, lookup)
    assert lookup.reads == []


async def test_other_kinds_pass_through():
    workload = {"apiVersion": "admitter.dev/v1alpha1", "kind": "Workload"}
    assert await allowed({**workload, "metadata": {"name": "w", "namespace": "team-a"}})
