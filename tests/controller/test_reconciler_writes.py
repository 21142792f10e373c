"""What the controller writes, on an in-memory API: one Event per admission and none for
creating a Workload, pending reasons only when they change and a bounded number per pass,
Workloads created directly take part while orphaned ones do not."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from fake_api import CLOCK, FakeApi, add, node, reconciler, settled_pass, workload
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.workload import CONDITION_QUOTA_RESERVED, Reason
from admitter.controller.queue_holds import Holdings
from admitter.controller.reconciler import Reconciler
from admitter.controller.snapshot import Translations, build_view
from admitter.controller.status import (
    EXPLAIN_AFTER,
    MESSAGE_REFRESH,
    PENDING_WRITES_PER_PASS,
    REASON_REFRESH,
    StatusWriter,
)
from admitter.core.decisions import Pending, PendingReason
from admitter.jobs.workloads import workload_name
from admitter.kube import client as kube
from admitter.kube.objects import Obj, format_time

from builders.kube import JobWrapper, cluster_queue, local_queue


def world(node_gpus: int = 8, quota: int = 8,
          clock: Callable[[], float] = lambda: CLOCK) -> tuple[FakeApi, Reconciler]:
    """One node, one ClusterQueue with quota = limit, its LocalQueue `default` in `ns`."""
    api = FakeApi()
    controller = reconciler(api, clock)
    caches = controller.caches
    add(api, caches.nodes, kube.NODES, node("n0", node_gpus))
    add(api, caches.cluster_queues, kube.CLUSTER_QUEUES, cluster_queue("team", quota, limit=quota))
    add(api, caches.local_queues, kube.LOCAL_QUEUES, local_queue("team", namespace="ns"))
    return api, controller


def stored(api: FakeApi, name: str) -> Obj:
    return api.objects[kube.WORKLOADS.path("ns", name)]


def reserved(wl: Obj) -> Obj:
    return next(c for c in wl["status"]["conditions"] if c["type"] == CONDITION_QUOTA_RESERVED)


async def test_a_job_is_admitted_with_one_event_on_it_and_none_for_its_workload() -> None:
    api, controller = world()
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("train", "ns").min_runtime(None).obj())
    await settled_pass(controller)
    assert api.count("POST", "workloads") == 1
    await settled_pass(controller)
    assert api.count("POST", "workloads") == 1
    assert api.count("PATCH", "workloads/status") == 1
    assert api.count("PATCH", "jobs") == 1
    [event] = api.events()
    assert (event["involvedObject"]["kind"], event["involvedObject"]["name"],
            event["reason"]) == ("Job", "train", Reason.ADMITTED)


async def test_workloads_created_directly_are_admitted_and_explained_once() -> None:
    api, controller = world()
    for name in ("a", "b", "c"):
        add(api, controller.caches.workloads, kube.WORKLOADS, workload("ns", name, 8))
    for _ in range(3):
        await settled_pass(controller)
    admitted = [n for n in "abc" if stored(api, n).get("status", {}).get("admission")]
    waiting = [n for n in "abc" if n not in admitted]
    assert len(admitted) == 1, "a Workload without a Job takes part like any other"
    assert api.count("PATCH", "workloads/status") == 3, \
        "one admission, then each waiting Workload's reason once over three passes"
    for name in waiting:
        assert "position" not in reserved(stored(api, name))["message"]
    events = api.events()
    told = [(e["involvedObject"]["name"], e["reason"] == Reason.ADMITTED) for e in events]
    assert sorted(told) == sorted([(admitted[0], True)] + [(n, False) for n in waiting]), \
        "one Event per admission and per new pending reason, on the Workload itself"


async def test_a_changed_reason_is_written_again_with_one_event() -> None:
    clock = [CLOCK]
    api, controller = world(node_gpus=16, quota=8, clock=lambda: clock[0])
    for name in ("a", "b"):
        add(api, controller.caches.workloads, kube.WORKLOADS, workload("ns", name, 8))
    await settled_pass(controller)
    await settled_pass(controller)
    waiting = next(n for n in "ab" if not stored(api, n).get("status", {}).get("admission"))
    before = reserved(stored(api, waiting))["reason"]
    writes, events = api.count("PATCH", "workloads/status"), len(api.events())
    # The node shrinks and the quota grows: the Workload now waits for room, not quota.
    add(api, controller.caches.nodes, kube.NODES, node("n0", 8))
    grown = cluster_queue("team", 16, limit=16)
    add(api, controller.caches.cluster_queues, kube.CLUSTER_QUEUES, grown)
    clock[0] += REASON_REFRESH
    await settled_pass(controller)
    await settled_pass(controller)
    assert reserved(stored(api, waiting))["reason"] != before
    assert api.count("PATCH", "workloads/status") == writes + 1
    assert len(api.events()) == events + 1


async def test_pending_reasons_are_bounded_per_pass_heads_first() -> None:
    api, controller = world()
    names = [f"w{i:03d}" for i in range(PENDING_WRITES_PER_PASS + 20)]
    for name in names:
        add(api, controller.caches.workloads, kube.WORKLOADS, workload("ns", name, 8))
    await settled_pass(controller)
    explained = [n for n in names if CONDITION_QUOTA_RESERVED in str(stored(api, n).get("status"))
                 and not stored(api, n)["status"].get("admission")]
    assert len(explained) == PENDING_WRITES_PER_PASS
    assert explained == names[1:PENDING_WRITES_PER_PASS + 1], "the queue's heads first"
    await settled_pass(controller)
    assert api.count("PATCH", "workloads/status") == len(names), "the rest in the next pass"


async def test_a_workload_whose_job_is_gone_is_left_out() -> None:
    api, controller = world()
    caches = controller.caches
    present = add(api, caches.jobs["Job"], kube.JOBS,
                  JobWrapper("present", "ns").min_runtime(None).obj())
    gone = {"metadata": {"name": "gone", "uid": "uid-gone"}}
    replaced = {"metadata": {"name": "present", "uid": "uid-of-an-earlier-job"}}
    for name, owner in (("orphan", gone), ("stale", replaced), ("owned", present)):
        add(api, caches.workloads, kube.WORKLOADS, workload("ns", name, 8, owner))
    view = build_view(caches, controller.settings, 0.0, Translations())
    assert sorted(view.workloads) == ["ns/owned"]


async def test_an_admitted_workload_whose_job_the_cache_lacks_still_holds_its_room() -> None:
    """The job may only lag in this replica's cache (its watch after a freeze): until the
    orphan is looked up and finished, its admission counts, and nothing is admitted into it."""
    api, controller = world(quota=16)
    caches = controller.caches
    lagging = {"metadata": {"name": "lagging", "uid": "uid-lagging"}}
    held = workload("ns", "admitted-orphan", 8, lagging)
    held["status"] = {"admission": {"clusterQueue": "team", "nodeHints": [
        {"podSet": "main", "node": "n0", "count": 1}]}}
    add(api, caches.workloads, kube.WORKLOADS, held)
    job = add(api, caches.jobs["Job"], kube.JOBS,
              JobWrapper("waiting", "ns").gpus(8).min_runtime(None).obj())
    add(api, caches.workloads, kube.WORKLOADS, workload("ns", "waiting", 8, job))
    view = build_view(caches, controller.settings, 0.0, Translations())
    assert [wl["metadata"]["name"] for wl in view.orphans] == ["admitted-orphan"]
    result = controller.decide(view.snapshot)
    assert result.admissions == ()
    assert {p.key for p in result.pending} == {"ns/waiting"}


async def test_an_unchanged_workload_is_translated_once() -> None:
    api, controller = world()
    caches = controller.caches
    add(api, caches.workloads, kube.WORKLOADS, workload("ns", "a", 8))
    translations = Translations()
    [first] = build_view(caches, controller.settings, 0.0, translations).snapshot.workloads
    [again] = build_view(caches, controller.settings, 1.0, translations).snapshot.workloads
    assert again is first
    add(api, caches.workloads, kube.WORKLOADS, workload("ns", "a", 4))
    [changed] = build_view(caches, controller.settings, 2.0, translations).snapshot.workloads
    assert changed is not first and changed.pod_sets[0].requests != first.pod_sets[0].requests


async def test_when_a_pending_reason_is_written() -> None:
    api = FakeApi()
    writer = StatusWriter(api)  # type: ignore[arg-type]
    wl = api.put(kube.WORKLOADS, workload("ns", "a", 8))
    fresh = workload("ns", "b", 8)
    fresh["metadata"]["creationTimestamp"] = format_time(CLOCK)
    fresh = api.put(kube.WORKLOADS, fresh)

    def due(obj: Obj, reason: PendingReason, message: str, now: float) -> list[str]:
        key = f"ns/{obj['metadata']['name']}"
        decision = Pending(key, "team", reason, message, 1)
        return [p.message for _, p in writer.pending_due({key: obj}, [decision], now)]

    assert due(fresh, PendingReason.NO_FIT, "m", CLOCK) == [], \
        "not while it may still be admitted at once"
    assert due(fresh, PendingReason.NO_FIT, "m", CLOCK + EXPLAIN_AFTER) == ["m"]
    [(_, first)] = writer.pending_due(
        {"ns/a": wl}, [Pending("ns/a", "team", PendingReason.QUOTA_EXCEEDED, "holds 8", 1)], CLOCK)
    wl = await writer.pending(wl, first, CLOCK)
    assert due(wl, PendingReason.QUOTA_EXCEEDED, "holds 8", CLOCK + 1000) == [], "shown already"
    assert due(wl, PendingReason.QUOTA_EXCEEDED, "holds 16", CLOCK + MESSAGE_REFRESH - 1) == []
    assert due(wl, PendingReason.QUOTA_EXCEEDED, "holds 16", CLOCK + MESSAGE_REFRESH) == [
        "holds 16"]
    assert due(wl, PendingReason.NO_FIT, "no room", CLOCK + REASON_REFRESH - 1) == []
    assert due(wl, PendingReason.NO_FIT, "no room", CLOCK + REASON_REFRESH) == ["no room"]


async def test_a_pending_reason_never_overwrites_a_newer_workload() -> None:
    api = FakeApi()
    writer = StatusWriter(api)  # type: ignore[arg-type]
    seen = api.put(kube.WORKLOADS, workload("ns", "a", 8))
    await api.patch(kube.WORKLOADS, "a", {"status": {"admission": {"clusterQueue": "team"}}},
                    "ns", "status")
    decision = Pending("ns/a", "team", PendingReason.NO_FIT, "no room", 1)
    assert await writer.pending(seen, decision, CLOCK) is None
    assert stored(api, "a")["status"] == {"admission": {"clusterQueue": "team"}}


async def test_a_queue_status_is_written_when_it_changes_at_most_once_a_second() -> None:
    api = FakeApi()
    writer = StatusWriter(api)  # type: ignore[arg-type]
    lq = api.put(kube.LOCAL_QUEUES, local_queue("team", namespace="ns"))
    waiting = [workload("ns", f"w{i}", 8) for i in range(3)]

    async def show(pending: int, now: float) -> Obj:
        writer.begin()
        await kube.each(writer.local_queue_writes([lq], waiting[:pending], Holdings(), now))
        shown: Obj = api.objects[kube.LOCAL_QUEUES.path("ns", "default")]["status"]
        return shown

    assert (await show(1, 0.0))["pendingWorkloads"] == 1
    assert (await show(1, 5.0))["pendingWorkloads"] == 1
    assert writer.next_due == math.inf, "nothing held back"
    assert (await show(2, 5.5))["pendingWorkloads"] == 2
    assert (await show(3, 6.0))["pendingWorkloads"] == 2, "within a second of the last write"
    assert writer.next_due == 6.5, "held back until the second is over, not forgotten"
    assert (await show(3, 6.5))["pendingWorkloads"] == 3
    assert api.count("PATCH", "localqueues/status") == 3


class RefusingApi(FakeApi):
    """Refuses what the real API server refuses for its content: a Workload of more pod sets
    than its CRD allows (422), and a start patch a validating webhook denies (400)."""

    async def create(self, kind: kube.Kind, obj: Obj) -> Obj:
        if kind == kube.WORKLOADS:
            raise ApiException(status=422, reason="Unprocessable Entity") from None
        return await super().create(kind, obj)

    async def patch(self, kind: kube.Kind, name: str, patch: Any, namespace: str | None = None,
                    subresource: str | None = None, content_type: str = kube.MERGE_PATCH) -> Obj:
        if kind == kube.JOBS and content_type == kube.JSON_PATCH:
            error = ApiException(status=400, reason="Bad Request")
            error.body = json.dumps({"message": 'admission webhook "x" denied the request'})
            raise error
        return await super().patch(kind, name, patch, namespace, subresource, content_type)


async def test_a_write_refused_for_the_jobs_own_content_is_a_warning_event_on_the_job() -> None:
    api = RefusingApi()
    controller = reconciler(api)
    caches = controller.caches
    add(api, caches.nodes, kube.NODES, node("n0", 8))
    add(api, caches.cluster_queues, kube.CLUSTER_QUEUES, cluster_queue("team", 8, limit=8))
    add(api, caches.local_queues, kube.LOCAL_QUEUES, local_queue("team", namespace="ns"))
    job = add(api, caches.jobs["Job"], kube.JOBS, JobWrapper("big", "ns").gpus(1).obj())
    for _ in range(2):
        await settled_pass(controller)
    (refused,) = [e for e in api.events() if e["reason"] == Reason.REFUSED]
    assert (refused["type"], refused["involvedObject"]["name"]) == ("Warning", "big")
    assert refused["message"] == "its Workload cannot be created: Unprocessable Entity"

    # Its Workload made some other way, admitted: starting it is refused, and said so.
    wl = workload("ns", workload_name(job), 1, owner=job)
    wl["status"] = {"admission": {"clusterQueue": "team", "topologyDomain": {}}}
    add(api, caches.workloads, kube.WORKLOADS, wl)
    await settled_pass(controller)
    told = [e["message"] for e in api.events()
            if e["reason"] == Reason.REFUSED and e["involvedObject"]["name"] == "big"]
    assert 'start refused: admission webhook "x" denied the request' in told
