"""A pass decides on the Workloads not yet Finished, kept beside the informer's store; the
index must equal a fresh filter of the store after any sequence of events, relists included,
and finished Workloads must stay out of what a pass reads and counts."""

from __future__ import annotations

from typing import Any

from fake_api import (
    CLOCK,
    FakeApi,
    ListingApi,
    WatchReplay,
    add,
    reconciler,
    settled_pass,
    team,
    workload,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from admitter.api.workload import CONDITION_FINISHED, Reason
from admitter.controller.cache import Caches
from admitter.controller.snapshot import Translations, build_view
from admitter.kube import client as kube
from admitter.kube.objects import Obj, is_true

NAMES = ("w0", "w1", "w2", "w3")


def finished(wl: Obj) -> Obj:
    condition = {"type": CONDITION_FINISHED, "status": "True", "reason": Reason.SUCCEEDED,
                 "message": "done"}
    return {**wl, "status": {**(wl.get("status") or {}), "conditions": [condition]}}


def fresh_filter(caches: Caches) -> dict[tuple[str, str], Obj]:
    """What the index stands for, from scratch: the specification."""
    return {(wl["metadata"]["namespace"], wl["metadata"]["name"]): wl
            for wl in caches.workloads.items() if not is_true(wl, CONDITION_FINISHED)}


event = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(NAMES), st.booleans()),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("relist"), st.integers(0, 15)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(event, max_size=40))
def test_the_index_matches_a_fresh_filter_after_any_events(events: list[tuple[Any, ...]]) -> None:
    api = ListingApi()
    caches = reconciler(api).caches
    replay = WatchReplay(api)
    for kind, *args in events:
        if kind == "put":
            name, done = args
            wl = workload("ns", name, 1)
            replay.put(caches.workloads, finished(wl) if done else wl)
        elif kind == "delete":
            replay.delete(caches.workloads, args[0])
        elif kind == "relist":
            replay.relist(caches.workloads, args[0])
        index = {(wl["metadata"]["namespace"], wl["metadata"]["name"]): wl
                 for wl in caches.unfinished_workloads()}
        assert index == fresh_filter(caches)


def test_an_admission_being_written_shows_over_whatever_the_store_holds() -> None:
    """The overlay wins for a live Workload and brings back one the store already shows
    Finished (the pass counts the admission until its write is done, as before)."""
    api = FakeApi()
    caches = reconciler(api).caches
    live = add(api, caches.workloads, kube.WORKLOADS, workload("ns", "live", 1))
    done = add(api, caches.workloads, kube.WORKLOADS, finished(workload("ns", "done", 1)))
    add(api, caches.workloads, kube.WORKLOADS, finished(workload("ns", "other", 1)))
    overlay = {("ns", "live"): {**live, "status": {"admission": {"clusterQueue": "team"}}},
               ("ns", "done"): {**done, "status": {"admission": {"clusterQueue": "team"}}},
               ("ns", "gone"): workload("ns", "gone", 1)}
    seen = caches.unfinished_workloads(overlay)
    assert sorted(wl["metadata"]["name"] for wl in seen) == ["done", "live"]
    assert all(wl["status"]["admission"] for wl in seen)


async def test_finished_workloads_are_neither_decided_on_nor_counted_as_admitted() -> None:
    """A Workload created directly and marked Finished by its owner keeps its admission in
    status; it holds no quota, so the view leaves it out and its LocalQueue does not count
    it as admitted."""
    api = FakeApi()
    now = [CLOCK]
    controller = reconciler(api, lambda: now[0])
    caches = controller.caches
    team(api, controller, 8, node_a=8)
    add(api, caches.workloads, kube.WORKLOADS, workload("ns", "running", 2))
    add(api, caches.workloads, kube.WORKLOADS, workload("ns", "done", 2))
    for _ in range(2):
        await settled_pass(controller)
    admitted = caches.workloads.get("ns", "done")
    assert admitted is not None and admitted["status"]["admission"]
    add(api, caches.workloads, kube.WORKLOADS, finished(admitted))
    now[0] += 60.0  # past the LocalQueue's write interval
    await settled_pass(controller)
    view = build_view(caches, controller.settings, 0.0, Translations())
    assert [w.key for w in view.snapshot.workloads] == ["ns/running"]
    local_queue = api.objects[kube.LOCAL_QUEUES.path("ns", "default")]
    assert local_queue["status"]["admittedWorkloads"] == 1
