"""The pod index equals a fresh count of the informers' stores after any sequence of pod and
Job events, relists included."""

from __future__ import annotations

from typing import Any

from fake_api import FakeApi, ListingApi, WatchReplay, add, reconciler
from hypothesis import given, settings
from hypothesis import strategies as st

from admitter.controller.cache import Caches
from admitter.core.model import GPU
from admitter.jobs.jobset import JobSet
from admitter.jobs.workloads import resource_of
from admitter.kube import client as kube
from admitter.kube.objects import TERMINAL_POD_PHASES, Obj

from builders.kube import JobWrapper

NODES = (None, "n1", "n2")
JOBS = ("j0", "j1", "j2")


def pod(name: str, node: str | None, phase: str, owner: str | None, gpus: int) -> Obj:
    meta: Obj = {"name": name, "namespace": "ns"}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Job", "name": owner}]
    spec: Obj = {"containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]}
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def fresh_count(caches: Caches) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """What the index stands for, counted from scratch: the specification."""
    bound: dict[Any, dict[str, int]] = {}
    foreign: dict[str, dict[str, int]] = {}
    for obj in caches.pods.items():
        node = obj["spec"].get("nodeName")
        if not node or obj["status"]["phase"] in TERMINAL_POD_PHASES:
            continue
        owners = [o["name"] for o in obj["metadata"].get("ownerReferences", [])]
        owner = ("Job", "ns", owners[0]) if owners else None
        if owner is not None and owner[1:] in caches.jobs["Job"].store:
            bound.setdefault(owner, {})
            bound[owner][node] = bound[owner].get(node, 0) + 1
        else:
            gpus = int(obj["spec"]["containers"][0]["resources"]["requests"][GPU])
            foreign.setdefault(node, {})
            foreign[node][GPU] = foreign[node].get(GPU, 0) + gpus
    return bound, foreign


pod_event = st.tuples(st.just("pod"), st.sampled_from(["p0", "p1", "p2", "p3"]),
                      st.sampled_from(NODES), st.sampled_from(["Pending", "Running", "Succeeded"]),
                      st.sampled_from((None, *JOBS)), st.integers(1, 3))
event = st.one_of(
    pod_event,
    st.tuples(st.just("delete-pod"), st.sampled_from(["p0", "p1", "p2", "p3"])),
    st.tuples(st.just("job"), st.sampled_from(JOBS)),
    st.tuples(st.just("delete-job"), st.sampled_from(JOBS)),
    st.tuples(st.just("relist-pods"), st.integers(0, 15)),
    st.tuples(st.just("relist-jobs"), st.integers(0, 7)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(event, max_size=40))
def test_the_index_matches_a_fresh_count_after_any_events(events: list[tuple[Any, ...]]) -> None:
    api = ListingApi()
    caches = reconciler(api).caches
    replay = WatchReplay(api)
    for kind, *args in events:
        if kind == "pod":
            name, node, phase, owner, gpus = args
            replay.put(caches.pods, pod(name, node, phase, owner, gpus))
        elif kind == "delete-pod":
            replay.delete(caches.pods, args[0])
        elif kind == "job" and caches.jobs["Job"].get("ns", args[0]) is None:
            add(api, caches.jobs["Job"], kube.JOBS,
                JobWrapper(args[0], "ns").gpus(1).min_runtime(None).obj())
        elif kind == "delete-job":
            replay.delete(caches.jobs["Job"], args[0])
        elif kind in ("relist-pods", "relist-jobs"):
            replay.relist(caches.pods if kind == "relist-pods" else caches.jobs["Job"], args[0])
        assert (caches.bound_pods(), caches.foreign_usage()) == fresh_count(caches)


def test_a_job_that_appears_after_its_pod_takes_the_pod_out_of_foreign_usage() -> None:
    api = FakeApi()
    caches = reconciler(api).caches
    caches.pods.observe(pod("p", "n1", "Running", "j0", 2))
    assert caches.foreign_usage() == {"n1": {GPU: 2}} and caches.bound_pods() == {}
    created = add(api, caches.jobs["Job"], kube.JOBS,
                  JobWrapper("j0", "ns").gpus(2).min_runtime(None).obj())
    assert caches.foreign_usage() == {} and caches.bound_pods() == {("Job", "ns", "j0"): {"n1": 1}}
    caches.jobs["Job"]._apply({"type": "DELETED", "object": created})
    assert caches.foreign_usage() == {"n1": {GPU: 2}} and caches.bound_pods() == {}


def test_pods_not_bound_or_finished_count_nowhere() -> None:
    caches = reconciler(FakeApi()).caches
    caches.pods.observe(pod("waiting", None, "Pending", None, 1))
    caches.pods.observe(pod("done", "n1", "Succeeded", None, 1))
    assert caches.foreign_usage() == {} and caches.bound_pods() == {}


def test_a_jobsets_pods_count_for_the_jobset_its_label_names() -> None:
    api = FakeApi()
    caches = reconciler(api).caches
    worker = pod("train-workers-0-0", "n1", "Running", "train-workers-0", 2)
    worker["metadata"]["labels"] = {"jobset.sigs.k8s.io/jobset-name": "train"}
    caches.pods.observe(worker)
    assert caches.foreign_usage() == {"n1": {GPU: 2}}
    jobsets = resource_of(JobSet())
    add(api, caches.jobs["JobSet"], jobsets,
        {"apiVersion": jobsets.group_version, "kind": "JobSet",
         "metadata": {"name": "train", "namespace": "ns", "uid": "u-1"}, "spec": {}})
    assert caches.foreign_usage() == {}
    assert caches.bound_pods() == {("JobSet", "ns", "train"): {"n1": 1}}
