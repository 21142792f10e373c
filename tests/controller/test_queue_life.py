"""A queue's life on an in-memory API: the finalizer follows what a queue holds, a queue
being deleted admits nothing new and says what it waits for, a pending Workload follows its
Job to another LocalQueue, and what the status writer holds back is scheduled, not dropped."""

from __future__ import annotations

import math

from fake_api import CLOCK, FakeApi, SlowApi, add, node, reconciler, team
from fake_api import settled_pass as one_pass
from fake_api import workload as workload_object

from admitter.api.contract import QUEUE_LABEL
from admitter.api.workload import CONDITION_ACTIVE, CONDITION_QUOTA_RESERVED, Reason
from admitter.controller.queue_holds import (
    IN_USE_FINALIZER,
    RELEASE_AFTER,
    Holdings,
    active_condition,
    closed_reason,
)
from admitter.controller.reconciler import Reconciler
from admitter.controller.status import (
    EXPLAIN_AFTER,
    PENDING_WRITES_PER_PASS,
    QUEUE_WRITE_INTERVAL,
    StatusWriter,
)
from admitter.core.decisions import CycleResult, Pending, PendingReason
from admitter.jobs.workloads import workload_name
from admitter.kube import client as kube
from admitter.kube.objects import Obj, format_time

from builders.kube import JobWrapper, cluster_queue, local_queue

DELETED_AT = format_time(CLOCK)


def world(quota: int = 8) -> tuple[FakeApi, Reconciler]:
    """One 16-GPU node; ClusterQueues `org` → `team` (quota = limit) and `other`; LocalQueue
    `default` → team and `spare` → other in namespace `ns`."""
    api = FakeApi()
    clock = [CLOCK]

    def tick() -> float:
        """Each pass a second later, so every queue status change may be written."""
        clock[0] += QUEUE_WRITE_INTERVAL
        return clock[0]

    controller = reconciler(api, tick)
    caches = controller.caches
    add(api, caches.nodes, kube.NODES, node("n0", 16))
    add(api, caches.cluster_queues, kube.CLUSTER_QUEUES, cluster_queue("org", 16, limit=16))
    team = cluster_queue("team", quota, limit=quota)
    team["spec"]["parent"] = "org"
    add(api, caches.cluster_queues, kube.CLUSTER_QUEUES, team)
    add(api, caches.cluster_queues, kube.CLUSTER_QUEUES, cluster_queue("other", quota, limit=quota))
    add(api, caches.local_queues, kube.LOCAL_QUEUES, local_queue("team", namespace="ns"))
    spare = local_queue("other", namespace="ns")
    spare["metadata"]["name"] = "spare"
    add(api, caches.local_queues, kube.LOCAL_QUEUES, spare)
    return api, controller


def stored(api: FakeApi, kind: kube.Kind, name: str, namespace: str | None = None) -> Obj:
    found: Obj = api.objects[kind.path(namespace, name)]
    return found


def finalizers(api: FakeApi) -> dict[str, list[str]]:
    """Which queues hold admitter's finalizer."""
    queues = [("org", None, kube.CLUSTER_QUEUES), ("team", None, kube.CLUSTER_QUEUES),
              ("other", None, kube.CLUSTER_QUEUES), ("default", "ns", kube.LOCAL_QUEUES),
              ("spare", "ns", kube.LOCAL_QUEUES)]
    return {name: stored(api, kind, name, namespace)["metadata"].get("finalizers", [])
            for name, namespace, kind in queues}


def delete(api: FakeApi, controller: Reconciler, kind: kube.Kind, name: str,
           namespace: str | None = None) -> None:
    """What the API server does on DELETE of an object with finalizers."""
    obj = stored(api, kind, name, namespace)
    obj["metadata"]["deletionTimestamp"] = DELETED_AT
    informer = controller.caches.local_queues if namespace else controller.caches.cluster_queues
    add(api, informer, kind, obj)


def condition(obj: Obj, kind: str) -> Obj:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


async def settle(controller: Reconciler, passes: int = 3) -> None:
    for _ in range(passes):
        await one_pass(controller)


async def test_queues_holding_admitted_workloads_carry_the_finalizer_until_none_are_left():
    api, controller = world()
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("train", "ns").min_runtime(None).obj())
    await settle(controller)
    holding = {name for name, found in finalizers(api).items() if IN_USE_FINALIZER in found}
    assert holding == {"org", "team", "default"}, "the leaf, its ancestors and the LocalQueue"
    finished = {**stored(api, kube.JOBS, "train", "ns"), "status": {"conditions": [
        {"type": "Complete", "status": "True"}]}}
    add(api, controller.caches.jobs["Job"], kube.JOBS, finished)
    await settle(controller)
    kept = {name for name, found in finalizers(api).items() if IN_USE_FINALIZER in found}
    assert kept == holding, "kept a while for the next job: no write for each short one"
    ticking = controller.clock
    controller.clock = lambda: ticking() + RELEASE_AFTER
    await settle(controller)
    assert not any(finalizers(api).values())


async def test_a_queue_being_deleted_loses_the_finalizer_as_soon_as_it_holds_nothing():
    api, controller = world()
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("train", "ns").min_runtime(None).obj())
    await settle(controller)
    finished = {**stored(api, kube.JOBS, "train", "ns"), "status": {"conditions": [
        {"type": "Complete", "status": "True"}]}}
    add(api, controller.caches.jobs["Job"], kube.JOBS, finished)
    await settle(controller)
    assert IN_USE_FINALIZER in finalizers(api)["team"], "idle for less than RELEASE_AFTER"
    delete(api, controller, kube.CLUSTER_QUEUES, "team")
    delete(api, controller, kube.LOCAL_QUEUES, "default", "ns")
    await settle(controller)
    remaining = {name for name, found in finalizers(api).items() if IN_USE_FINALIZER in found}
    assert remaining == {"org"}, "the queues being deleted go at once; the parent later"


async def test_a_cluster_queue_being_deleted_admits_nothing_new_and_says_what_it_waits_for():
    api, controller = world(quota=8)
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("running", "ns").min_runtime(None).obj())
    await settle(controller)
    delete(api, controller, kube.CLUSTER_QUEUES, "team")
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("late", "ns").gpus(1).min_runtime(None).obj())
    await settle(controller)
    late = stored(api, kube.WORKLOADS, workload_name(stored(api, kube.JOBS, "late", "ns")), "ns")
    assert not late["status"].get("admission")
    reserved = condition(late, CONDITION_QUOTA_RESERVED)
    assert reserved["reason"] == PendingReason.QUEUE_CLOSED
    assert "ClusterQueue 'team' is being deleted" in reserved["message"]
    active = condition(stored(api, kube.CLUSTER_QUEUES, "team"), CONDITION_ACTIVE)
    assert (active["status"], active["reason"]) == ("False", Reason.TERMINATING)
    running = workload_name(stored(api, kube.JOBS, "running", "ns"))
    assert f"waits for 1 admitted Workload(s) to finish or be evicted (ns/{running})" in \
        active["message"]
    assert IN_USE_FINALIZER in finalizers(api)["team"], "held while its Workload runs"


async def test_an_admission_into_a_queue_whose_deletion_just_began_is_not_written():
    api, controller = world()
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("train", "ns").min_runtime(None).obj())
    await one_pass(controller)  # creates the Workload
    # Deleted between the cache's view and the finalizer: the API server refuses the new
    # finalizer (the fake, by a version the cache never saw and a read showing deletion).
    team = stored(api, kube.CLUSTER_QUEUES, "team")
    team["metadata"].update(deletionTimestamp=DELETED_AT, resourceVersion="deleting")
    original = api.patch

    async def refusing(kind, name, patch, namespace=None, **kwargs):  # type: ignore[no-untyped-def]
        if (patch.get("metadata") or {}).get("finalizers") and (
                api.objects[kind.path(namespace, name)]["metadata"].get("deletionTimestamp")):
            raise kube.ApiException(status=422, reason="no new finalizers while deleting")
        return await original(kind, name, patch, namespace, **kwargs)

    api.patch = refusing  # type: ignore[method-assign]
    await one_pass(controller)
    [wl] = [o for path, o in api.objects.items() if "/workloads/" in path]
    assert not (wl.get("status") or {}).get("admission")
    assert stored(api, kube.JOBS, "train", "ns")["spec"]["suspend"]


async def test_a_pending_workload_follows_its_job_to_another_local_queue():
    api, controller = world(quota=8)
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("first", "ns").min_runtime(None).obj())
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("second", "ns").min_runtime(None).obj())
    await settle(controller)
    names = {n: workload_name(stored(api, kube.JOBS, n, "ns")) for n in ("first", "second")}
    waiting = next(n for n, w in names.items()
                   if not stored(api, kube.WORKLOADS, w, "ns")["status"].get("admission"))
    moved = stored(api, kube.JOBS, waiting, "ns")
    moved["metadata"]["labels"] = {QUEUE_LABEL: "spare"}
    add(api, controller.caches.jobs["Job"], kube.JOBS, moved)
    await settle(controller)
    wl = stored(api, kube.WORKLOADS, names[waiting], "ns")
    assert wl["spec"]["queueName"] == "spare"
    assert wl["status"]["admission"]["clusterQueue"] == "other", "admitted in its new queue"
    counts = {name: stored(api, kube.LOCAL_QUEUES, name, "ns")["status"]
              for name in ("default", "spare")}
    assert counts["default"]["admittedWorkloads"] == 1
    assert counts["spare"]["admittedWorkloads"] == 1


async def test_an_admitted_workload_keeps_its_queue_when_its_job_is_relabelled():
    api, controller = world()
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("train", "ns").min_runtime(None).obj())
    await settle(controller)
    relabelled = stored(api, kube.JOBS, "train", "ns")
    relabelled["metadata"]["labels"] = {QUEUE_LABEL: "spare"}  # webhooks bypassed
    add(api, controller.caches.jobs["Job"], kube.JOBS, relabelled)
    await settle(controller)
    wl = stored(api, kube.WORKLOADS, workload_name(relabelled), "ns")
    assert wl["spec"]["queueName"] == "default" and wl["status"]["admission"]


def test_why_a_queue_is_closed():
    team = cluster_queue("team", 8, limit=8)
    local_queues = {("ns", "default"): local_queue("team", namespace="ns")}
    assert closed_reason(local_queues, {"team": team}, "ns", "default") is None
    assert "LocalQueue 'gone' does not exist in namespace 'ns'" in closed_reason(
        local_queues, {"team": team}, "ns", "gone")
    assert "points to ClusterQueue 'team', which does not exist" in closed_reason(
        local_queues, {}, "ns", "default")
    team["metadata"]["deletionTimestamp"] = DELETED_AT
    assert "ClusterQueue 'team' is being deleted" in closed_reason(
        local_queues, {"team": team}, "ns", "default")


def test_the_active_condition_names_what_a_deletion_waits_for():
    queue = cluster_queue("team", 8, limit=8)
    assert active_condition(queue, ["ns/a"]) == ("True", Reason.READY, "admitting workloads")
    queue["metadata"]["deletionTimestamp"] = DELETED_AT
    status, reason, message = active_condition(queue, [f"ns/w{i}" for i in range(5)])
    assert (status, reason) == ("False", Reason.TERMINATING)
    assert "waits for 5 admitted Workload(s)" in message
    assert "(ns/w0, ns/w1, ns/w2 and 2 more)" in message
    assert "waits" not in active_condition(queue, [])[2]


# The status writer's schedule ---------------------------------------------------------------


def pending_objects(api: FakeApi, count: int, created: float) -> dict[str, Obj]:
    found = {}
    for i in range(count):
        obj = workload_object("ns", f"w{i:03d}", 8)
        obj["metadata"]["creationTimestamp"] = format_time(created)
        found[f"ns/w{i:03d}"] = api.put(kube.WORKLOADS, obj)
    return found


def decisions(workloads: dict[str, Obj]) -> list[Pending]:
    return [Pending(key, "team", PendingReason.QUOTA_EXCEEDED, "m", i + 1)
            for i, key in enumerate(workloads)]


def test_a_first_reason_held_back_for_a_fresh_workload_is_scheduled_for_when_it_is_due():
    api = FakeApi()
    writer = StatusWriter(api)  # type: ignore[arg-type]
    fresh = pending_objects(api, 1, CLOCK)
    writer.begin()
    assert writer.pending_due(fresh, decisions(fresh), CLOCK + 0.25) == []
    assert writer.next_due == CLOCK + EXPLAIN_AFTER, "the loop runs a pass by then"
    writer.begin()
    assert len(writer.pending_due(fresh, decisions(fresh), writer_due := CLOCK + 1.0)) == 1
    assert writer_due - CLOCK <= 2.0 and writer.next_due == math.inf


def test_a_burst_of_first_reasons_goes_out_a_bounded_batch_a_second():
    api = FakeApi()
    writer = StatusWriter(api)  # type: ignore[arg-type]
    burst = pending_objects(api, 3 * PENDING_WRITES_PER_PASS, CLOCK - 60)
    writer.begin()
    due = writer.pending_due(burst, decisions(burst), CLOCK)
    assert len(due) == PENDING_WRITES_PER_PASS
    assert writer.next_due == CLOCK + QUEUE_WRITE_INTERVAL


async def settled_result(controller: Reconciler) -> CycleResult:
    result = await controller.reconcile()
    await controller.admitting.drain()
    assert controller.reports is not None
    await controller.reports
    return result


async def test_allocation_shows_zero_and_a_change_held_back_by_the_interval_is_scheduled():
    api, controller = world()
    shown = FakeApi()  # what the writer under test writes, apart from the controller's own
    writer = StatusWriter(shown)  # type: ignore[arg-type]
    team = shown.put(kube.CLUSTER_QUEUES, stored(api, kube.CLUSTER_QUEUES, "team"))

    async def show(result: CycleResult, now: float) -> object:
        writer.begin()
        await kube.each(writer.cluster_queue_writes({"team": team}, result, controller.usage,
                                                       Holdings(), now))
        return stored(shown, kube.CLUSTER_QUEUES, "team")["status"]["allocated"]

    idle = await settled_result(controller)
    assert await show(idle, CLOCK) == {"nvidia.com/gpu": 0}, "0, not blank"
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("a", "ns").gpus(4).min_runtime(None).obj())
    await settled_result(controller)  # creates its Workload
    busy = await settled_result(controller)  # admits it
    assert await show(busy, CLOCK + 0.5) == {"nvidia.com/gpu": 0}
    assert writer.next_due == CLOCK + QUEUE_WRITE_INTERVAL, "held back, and scheduled"
    assert await show(busy, CLOCK + QUEUE_WRITE_INTERVAL) == {"nvidia.com/gpu": 4}
    assert writer.next_due == math.inf


async def test_a_report_left_to_the_running_batch_wakes_the_loop_when_that_batch_ends():
    api = SlowApi()
    controller = reconciler(api)
    team(api, controller, 8, node_a=8)
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("train", "ns").min_runtime(None).obj())
    await controller.reconcile()  # creates the Workload; its report's writes wait
    assert controller.reports is not None and not controller.reports.done()
    controller.status.next_due = CLOCK  # something held back earlier
    controller.wakeup.clear()
    await controller.reconcile()
    assert controller.report_owed and controller.status.next_due == math.inf, \
        "no timer while the batch runs: the loop would spin"
    assert not controller.wakeup.is_set()
    api.open.set()
    await controller.reports
    assert controller.wakeup.is_set(), "the batch's end wakes a pass to report what is due"
