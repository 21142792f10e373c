"""A parent cycle that two concurrent re-parentings closed behind the webhook's back: the
controller leaves the queues on it (and below it) out of its tree, holds their admissions,
says why in their Active condition, and resumes as soon as a parent changes."""

from __future__ import annotations

from fake_api import add
from test_queue_life import condition, settle, stored, world

from admitter.api.workload import CONDITION_ACTIVE, Reason
from admitter.controller.queue_holds import outside_tree_condition
from admitter.jobs.workloads import workload_name
from admitter.kube import client as kube

from builders.kube import JobWrapper, cluster_queue


def reparent(api, controller, name: str, parent: str | None) -> None:
    queue = stored(api, kube.CLUSTER_QUEUES, name)
    queue["spec"] = {**queue["spec"], "parent": parent}
    add(api, controller.caches.cluster_queues, kube.CLUSTER_QUEUES, queue)


def active(api, name: str) -> tuple[str, str, str]:
    found = condition(stored(api, kube.CLUSTER_QUEUES, name), CONDITION_ACTIVE)
    return found["status"], found["reason"], found["message"]


async def test_a_cycle_holds_its_queues_admissions_with_a_condition_until_it_is_broken():
    api, controller = world()
    reparent(api, controller, "org", "team")  # team → org was there: org → team closes it
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("train", "ns").min_runtime(None).obj())
    await settle(controller)
    train = workload_name(stored(api, kube.JOBS, "train", "ns"))
    assert not stored(api, kube.WORKLOADS, train, "ns")["status"].get("admission")
    assert stored(api, kube.JOBS, "train", "ns")["spec"]["suspend"] is True
    for name, shown in (("org", "org -> team -> org"), ("team", "team -> org -> team")):
        status, reason, message = active(api, name)
        assert (status, reason) == ("False", Reason.PARENT_CYCLE)
        assert message.startswith(f"in the parent cycle {shown}"), message
    assert active(api, "other")[:2] == ("True", Reason.READY), "the rest of the tree is open"

    reparent(api, controller, "org", None)
    await settle(controller)
    assert stored(api, kube.WORKLOADS, train, "ns")["status"].get("admission")
    assert active(api, "org")[:2] == active(api, "team")[:2] == ("True", Reason.READY)


def test_queues_below_a_cycle_or_a_missing_parent_are_named_so():
    queues = {q["metadata"]["name"]: q for q in (
        cluster_queue("a", parent="b"), cluster_queue("b", parent="a"),
        cluster_queue("leaf", parent="a"), cluster_queue("orphan", parent="gone"),
        cluster_queue("root"), cluster_queue("child", parent="root"))}
    below = outside_tree_condition(queues, "leaf")
    assert below is not None and below[1] == Reason.PARENT_CYCLE
    assert below[2].startswith("below the parent cycle a -> b -> a")
    missing = outside_tree_condition(queues, "orphan")
    assert missing is not None and missing[1] == Reason.PARENT_MISSING
    assert "'gone', which does not exist" in missing[2]
    assert outside_tree_condition(queues, "child") is None
    assert outside_tree_condition(queues, "root") is None
