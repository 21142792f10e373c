"""Objects any tenant can create that the API server accepts: amounts are read as Kubernetes
reads them, and what still cannot be read is skipped and reported on itself, never raised
through an informer or a pass, and holds up nothing else."""

from __future__ import annotations

import asyncio
import copy
import math
from decimal import Decimal
from typing import Any

import pytest
from fake_api import FakeApi, add, node, reconciler, settled_pass, team, workload
from hypothesis import given, settings
from hypothesis import strategies as st

from admitter.api.quantity import kube_base_units, parse_quantity, to_base_units
from admitter.api.workload import Reason
from admitter.controller.reconciler import Reconciler
from admitter.core.model import GPU
from admitter.jobs.workloads import workload_name
from admitter.kube import client as kube
from admitter.kube.objects import Obj

from builders.kube import JobWrapper, cluster_queue


def bare_pod(name: str, requests: dict[str, object], node: str = "node-a") -> Obj:
    return {"kind": "Pod",
            "metadata": {"name": name, "namespace": "tenant"},
            "spec": {"nodeName": node,
                     "containers": [{"name": "c", "resources": {"requests": requests}}]},
            "status": {"phase": "Running"}}


def admitted(controller: Reconciler, name: str) -> bool:
    found = controller.caches.jobs["Job"].get("ns", name)
    assert found is not None
    wl = controller.caches.workloads.get("ns", workload_name(found))
    return wl is not None and bool((wl.get("status") or {}).get("admission"))


def unreadable_gauge(controller: Reconciler, kind: str) -> float | None:
    return controller.metrics.registry.get_sample_value("admitter_unreadable_objects",
                                                        {"kind": kind})


@pytest.mark.parametrize(("resource", "value", "base"), [
    ("memory", "500m", 1),  # the API server accepts it (with a warning); the scheduler: 1 byte
    ("memory", "1.5", 2),
    ("memory", "1e3", 1000),
    ("memory", "0.5Ki", 512),
    ("cpu", "0.0001", 1),  # finer than 1m rounds up to 1m
    ("cpu", "1.5", 1500),
    (GPU, ".5", 1),
    (GPU, 2, 2),
])
def test_amounts_read_from_the_api_server_round_up_as_kubernetes_does(
        resource: str, value: object, base: int) -> None:
    assert kube_base_units(resource, value) == base


def test_user_input_keeps_its_strict_parsing() -> None:
    with pytest.raises(ValueError, match="whole number"):
        to_base_units("memory", parse_quantity("500m"))
    with pytest.raises(ValueError, match="more precise than 1m"):
        parse_quantity("0.0001")


@given(st.decimals(min_value=0, max_value=10**12, places=6), st.sampled_from(["cpu", "memory"]))
def test_kube_units_are_the_smallest_whole_unit_not_below_the_amount(amount: Decimal,
                                                                      resource: str) -> None:
    scale = 1000 if resource == "cpu" else 1
    assert kube_base_units(resource, str(amount)) == math.ceil(amount * scale)


@pytest.mark.parametrize("value", ["1e40", "8x", True, {"a": 1}, "NaN"])
def test_what_kubernetes_cannot_count_either_is_refused(value: object) -> None:
    with pytest.raises(ValueError):
        kube_base_units("memory", value)


async def test_a_bare_pod_with_a_fractional_memory_request_is_counted_not_fatal() -> None:
    api = FakeApi()
    controller = reconciler(api)
    team(api, controller, 8, node_a=8)
    add(api, controller.caches.pods, kube.PODS, bare_pod("odd", {"memory": "500m"}))
    assert controller.caches.foreign_usage() == {"node-a": {"memory": 1}}
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("train", "ns").min_runtime(None).obj())
    for _ in range(2):
        await settled_pass(controller)
    assert admitted(controller, "train")


async def test_a_labelled_job_with_a_fractional_memory_request_is_admitted() -> None:
    api = FakeApi()
    controller = reconciler(api)
    team(api, controller, 8)
    with_memory = node("node-a", 8)
    with_memory["status"]["allocatable"]["memory"] = "64Gi"
    add(api, controller.caches.nodes, kube.NODES, with_memory)
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("odd", "ns").gpus(1).min_runtime(None).request("memory", "500m").obj())
    for _ in range(2):
        await settled_pass(controller)
    assert admitted(controller, "odd")
    job = controller.caches.jobs["Job"].items()[0]
    wl = controller.caches.workloads.get("ns", workload_name(job))
    assert wl is not None and wl["spec"]["podSets"][0]["requests"]["memory"] == 1


async def test_objects_that_cannot_be_read_are_skipped_reported_and_hold_up_nothing() -> None:
    api = FakeApi()
    controller = reconciler(api)
    caches = controller.caches
    team(api, controller, 8, node_a=8)
    add(api, caches.pods, kube.PODS, bare_pod("huge", {"memory": "1e40"}))
    add(api, caches.pods, kube.PODS, {"kind": "Pod", "metadata": {"name": "odd",
                                                                 "namespace": "tenant"},
                                      "spec": {"nodeName": "node-a", "containers": "x"}})
    bad_job = JobWrapper("bad", "ns").gpus(1).min_runtime(None).obj()
    bad_job["spec"]["parallelism"] = "many"
    add(api, caches.jobs["Job"], kube.JOBS, bad_job)
    bad_wl = workload("ns", "bad-wl", 1)
    bad_wl["spec"]["podSets"][0]["count"] = "lots"
    add(api, caches.workloads, kube.WORKLOADS, bad_wl)
    add(api, caches.nodes, kube.NODES, {"metadata": {"name": "node-b"},
                                        "status": {"allocatable": {GPU: "1e40"}}})
    add(api, caches.cluster_queues, kube.CLUSTER_QUEUES,
        {**cluster_queue("broken", 8, limit=8), "spec": {"resources": "none"}})
    add(api, caches.jobs["Job"], kube.JOBS, JobWrapper("good", "ns").min_runtime(None).obj())
    for _ in range(2):
        await settled_pass(controller)
    assert admitted(controller, "good"), "the good Job is admitted all the same"
    for kind, count in (("Pod", 2), ("Job", 1), ("Workload", 1), ("Node", 1),
                        ("ClusterQueue", 1)):
        assert unreadable_gauge(controller, kind) == count, kind
    warned = {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in api.events()
              if e["reason"] == Reason.UNREADABLE and e["type"] == "Warning"}
    assert warned == {("Pod", "huge"), ("Pod", "odd"), ("Job", "bad"), ("Workload", "bad-wl"),
                      ("Node", "node-b"), ("ClusterQueue", "broken")}
    events_before = len(api.events())
    await settled_pass(controller)
    assert len(api.events()) == events_before, "told once, not on every pass"

    fixed = {**bad_wl, "spec": workload("ns", "bad-wl", 1)["spec"]}
    add(api, caches.workloads, kube.WORKLOADS, fixed)
    await settled_pass(controller)
    assert unreadable_gauge(controller, "Workload") == 0, "a fixed object is read again"


QUANTITIES = st.sampled_from(["500m", "1e40", "-1", "0.5Ki", "0", "1E", "2Gi", "+.5e3"])
STRINGS = st.text(max_size=8) | QUANTITIES


def _like(original: object) -> st.SearchStrategy[Any]:
    """Values of the original's JSON type: what the API server's typed schema lets through
    in that place (a string may be any string, a number any number...)."""
    if isinstance(original, bool):
        return st.booleans()
    if isinstance(original, int):
        return st.integers(-(2**40), 2**40)
    if isinstance(original, str):
        return STRINGS
    if isinstance(original, dict):
        return st.dictionaries(st.text(min_size=1, max_size=5), STRINGS, max_size=3)
    assert isinstance(original, list)
    return st.lists(st.just(original[0]), max_size=3) if original else st.just([])


def _paths(obj: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every place in a JSON object a value could be replaced."""
    found: list[tuple[object, ...]] = [prefix] if prefix else []
    if isinstance(obj, dict):
        for key, value in obj.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            found += _paths(value, (*prefix, index))
    return found


def _replaced(obj: Obj, path: tuple[object, ...], value: object) -> Obj:
    """`obj` with the value at `path` replaced, or as it is if an earlier mutation took the
    path away."""
    out = copy.deepcopy(obj)
    node: Any = out
    try:
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
    except (KeyError, IndexError, TypeError):
        return obj
    return out


def _kinds() -> list[tuple[str, Obj]]:
    """A valid object of each kind a tenant (or an admin) writes; metadata names stay."""
    wl = workload("ns", "mutant-wl", 1)
    # The pod runs beside the cluster's node: a pod bound to node-a asking more than it has
    # would rightly take its room (the kubelet would fail it; here it would stay Running).
    return [("pod", bare_pod("mutant-pod", {"memory": "1Gi", GPU: "1"}, node="elsewhere")),
            ("job", JobWrapper("mutant-job", "ns").gpus(1).min_runtime(None).obj()),
            ("workload", wl),
            ("node", node("mutant-node", 8))]


def _at(obj: Obj, path: tuple[object, ...]) -> object:
    node: Any = obj
    for part in path:
        node = node[part]
    return node


MUTATION = st.sampled_from([
    (kind, path) for kind, obj in _kinds() for path in _paths(obj)
    if path[0] != "metadata" or path[-1] not in ("name", "namespace")
]).flatmap(lambda place: st.tuples(st.just(place),
                                   _like(_at(dict(_kinds())[place[0]], place[1]))))


@settings(max_examples=60, deadline=None)
@given(st.lists(MUTATION, min_size=1, max_size=3))
def test_no_mutated_object_stops_a_pass_or_the_good_jobs(
        mutations: list[tuple[tuple[str, tuple[object, ...]], object]]) -> None:
    async def run() -> None:
        api = FakeApi()
        controller = reconciler(api)
        caches = controller.caches
        team(api, controller, 8, node_a=8)
        informers = {"pod": (caches.pods, kube.PODS), "job": (caches.jobs["Job"], kube.JOBS),
                     "workload": (caches.workloads, kube.WORKLOADS),
                     "node": (caches.nodes, kube.NODES)}
        objects = dict(_kinds())
        for (kind, path), value in mutations:
            objects[kind] = _replaced(objects[kind], path, value)
        for kind, obj in objects.items():
            informer, resource = informers[kind]
            try:
                add(api, informer, resource, obj)
            except (KeyError, TypeError, AttributeError):
                continue  # no name left: the API server would not have stored it
        add(api, caches.jobs["Job"], kube.JOBS,
            JobWrapper("good", "ns").gpus(4).min_runtime(None).obj())
        for _ in range(2):
            await settled_pass(controller)
        assert admitted(controller, "good")

    asyncio.run(run())
