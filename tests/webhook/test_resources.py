"""Validation of ClusterQueues, LocalQueues and Topologies on AdmissionReview fixtures."""

import copy

import pytest
from review_fixtures import CONTROLLER, NAMESPACE, POLICY, FakeLookup, request, standard_lookup

from admitter.webhook.resources import validate_resource

from builders.kube import cluster_queue, local_queue, topology


async def denial(obj, old=None, lookup=None) -> str:
    verdict = await validate_resource(request(obj, old), lookup or standard_lookup(), POLICY)
    assert not verdict.allowed, "expected a denial"
    assert verdict.code == 422
    return verdict.message


async def allowed(obj, old=None, lookup=None) -> bool:
    return (await validate_resource(request(obj, old), lookup or standard_lookup(), POLICY)).allowed


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
    message = await denial(cluster_queue("team-c", parent="org", maxMinRuntime="soon"))
    assert "spec.maxMinRuntime: 'soon' is not a duration (expected e.g. 90s" in message


async def test_a_topology_with_a_repeated_level_is_denied():
    message = await denial(topology("t", "rack", "rack"))
    assert "spec.levels: node label 'rack' appears twice" in message


async def test_a_topology_without_levels_is_denied():
    assert "spec.levels" in await denial(topology("t"))


async def test_a_local_queue_without_its_cluster_queue_field_is_denied():
    queue = local_queue("team-a", name="q", namespace=NAMESPACE)
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
    assert await allowed(local_queue("team-b", name="q", namespace=NAMESPACE))


async def test_a_local_queue_on_a_missing_cluster_queue_is_denied_listing_leaves():
    message = await denial(local_queue("nope", name="q", namespace=NAMESPACE))
    assert (
        "spec.clusterQueue: ClusterQueue 'nope' does not exist; name a leaf ClusterQueue "
        "(existing leaves: team-a, team-b)"
    ) in message


async def test_a_local_queue_on_a_parent_is_denied_naming_its_children():
    message = await denial(local_queue("research", name="q", namespace=NAMESPACE))
    assert "ClusterQueue 'research' is a parent queue (children: team-a, team-b)" in message
    assert "name a leaf ClusterQueue instead" in message


async def test_retargeting_a_local_queue_is_checked_but_other_edits_are_not():
    old = local_queue("team-a", name="q", namespace=NAMESPACE)
    retargeted = local_queue("org", name="q", namespace=NAMESPACE)
    assert "is a parent queue" in await denial(retargeted, old)
    lookup = FakeLookup()
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert await allowed(relabelled, old, lookup)
    assert lookup.reads == []


# ---- bounds: a denial naming the field, never a failure ------------------------------------


@pytest.mark.parametrize(
    "knobs, said",
    [
        ({"quota": "500m"}, "nvidia.com/gpu must be a whole number, got 500m"),
        ({"quota": "1e30"}, "'1e30' is out of range: admitter accepts quantities up to 1Ei"),
        ({"quota": 8, "overQuotaWeight": 1e308}, "overQuotaWeight: Input should be less than"),
    ],
)
async def test_out_of_range_cluster_queue_knobs_are_denied_naming_the_field(knobs, said):
    queue = cluster_queue("team-c", parent="research")
    queue["spec"]["resources"]["nvidia.com/gpu"] = knobs
    message = await denial(queue)
    assert "spec.resources" in message and said in message


async def test_a_topology_with_the_host_before_the_rack_is_denied():
    message = await denial(topology("t", "kubernetes.io/hostname", "rack"))
    assert "spec.levels: kubernetes.io/hostname is the narrowest level" in message


async def test_a_metadata_edit_of_an_object_stored_before_a_rule_is_allowed():
    old = cluster_queue("legacy")
    old["spec"]["resources"]["nvidia.com/gpu"] = {"quota": "500m"}
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "a"}
    assert await allowed(new, old, FakeLookup())
    new["spec"]["priority"] = 1
    assert "whole number" in await denial(new, old, FakeLookup())


# ---- deleting ClusterQueues --------------------------------------------------------------


async def deletion(obj, user="alice"):
    return await validate_resource(
        request(obj, obj, user, operation="DELETE"), standard_lookup(), POLICY
    )


async def test_a_parent_cluster_queue_cannot_be_deleted_while_it_has_children():
    verdict = await deletion(cluster_queue("research", parent="org"))
    assert not verdict.allowed and verdict.code == 422
    assert "ClusterQueue 'research' is the parent of team-a, team-b" in verdict.message
    assert "delete or re-parent its children first" in verdict.message


async def test_leaves_and_invalid_objects_may_always_be_deleted():
    assert (await deletion(cluster_queue("team-b", parent="research"))).allowed
    broken = topology("t", "kubernetes.io/hostname", "rack")
    assert (await deletion(broken)).allowed
    assert (await deletion(local_queue("team-a", namespace=NAMESPACE))).allowed


# ---- Workloads ----------------------------------------------------------------------------


def workload(queue="default", gpus=8, **spec):
    return {
        "apiVersion": "admitter.dev/v1alpha1", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "team-a"},
        "spec": {"queueName": queue,
                 "podSets": [{"name": "main", "count": 2, "requests": {"nvidia.com/gpu": gpus}}],
                 **spec},
    }


async def test_a_workload_on_an_existing_queue_within_its_cap_is_allowed():
    topology_request = {"required": "topology.admitter.dev/rack"}
    assert await allowed(workload(minRuntime="2h", topology=topology_request))


@pytest.mark.parametrize(
    "obj, said",
    [
        (workload(gpus=-64), "spec.podSets[0].requests: nvidia.com/gpu must not be negative"),
        (workload(minRuntime="99999d"), "spec.minRuntime: '99999d' is not a duration admitter"),
        (workload(minRuntime="3h"), "spec.minRuntime: 3h is above maxMinRuntime 2h of "
                                    "ClusterQueue 'team-a'"),
        (workload(queue="nope"), "spec.queueName: LocalQueue 'nope' does not exist in namespace "
                                 "'team-a' (existing: default, shared)"),
        (workload(topology={"required": "garbage"}),
         "spec.topology.required: 'garbage' is not a level of the cluster's Topology"),
        (workload(topology={"preferred": "ünïcode"}), "spec.topology.preferred: 'ünïcode' is not"),
    ],
)
async def test_a_bad_workload_is_denied_naming_the_field(obj, said):
    assert said in await denial(obj)


async def test_the_controllers_workloads_skip_the_reference_checks_but_not_the_model():
    unknown = workload(queue="deleted-since")
    verdict = await validate_resource(request(unknown, user=CONTROLLER), FakeLookup(), POLICY)
    assert verdict.allowed
    negative = await validate_resource(request(workload(gpus=-1), user=CONTROLLER),
                                       FakeLookup(), POLICY)
    assert not negative.allowed


async def test_an_admitted_workloads_spec_is_frozen():
    old = workload()
    old["status"] = {"admission": {"clusterQueue": "team-a", "admittedAt": "2026-01-01T00:00:00Z"}}
    grown = copy.deepcopy(old)
    grown["spec"]["podSets"][0]["count"] = 20
    message = await denial(grown, old)
    assert "spec.podSets: cannot change while the Workload holds quota" in message
    pending = workload()
    assert await allowed(copy.deepcopy(grown) | {"status": {}}, pending)


async def test_a_workload_preferring_a_coarser_level_than_it_requires_is_denied():
    coarser = {"required": "topology.admitter.dev/rack", "preferred": "topology.admitter.dev/block"}
    message = await denial(workload(topology=coarser))
    assert "spec.topology.preferred: 'topology.admitter.dev/block' is coarser than required" in (
        message)
    finer = {"required": "topology.admitter.dev/block", "preferred": "kubernetes.io/hostname"}
    assert await allowed(workload(topology=finer))
