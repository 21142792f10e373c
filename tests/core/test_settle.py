"""Where admitted pods count once kube-scheduler has bound some of them elsewhere."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from admitter.core.model import GPU, Node, Phase, PodSet, Taint
from admitter.core.nodes import ClusterState
from admitter.core.settle import AdmittedPods, Placement, settle

from builders.core import LEVELS, RACK, gang, node, workload


def admitted(key: str, pod_set: PodSet, hinted: dict[str, int], bound: dict[str, int] | None = None,
             domain: dict[str, str] | None = None) -> AdmittedPods:
    return AdmittedPods(key, (pod_set,), (hinted,), (bound or {},), (domain or {},))


def model(nodes: tuple[Node, ...], pods: list[AdmittedPods]) -> ClusterState:
    """The node model the controller builds: hints, replaced where settling moved pods."""
    settled = settle(nodes, pods)
    workloads = []
    for pod in pods:
        placement: Placement = settled.get(pod.key, pod.hinted)
        merged: dict[str, int] = {}
        for counts in placement:
            for name, count in counts.items():
                merged[name] = merged.get(name, 0) + count
        workloads.append(replace(workload(pod.key, *pod.pod_sets), phase=Phase.ADMITTED,
                                 placement=merged, pod_set_placements=placement))
    return ClusterState(nodes, LEVELS, workloads)


def test_a_pod_bound_away_from_its_hint_moves_the_unbound_ones_to_the_room_left() -> None:
    """w1 was hinted to n1 but bound on n2; w2 and w3 were hinted to n2 and are unbound. n2
    now has room for one of them, so the other can only land on n1: counting all three on n2
    would show n1 free and the cluster with 4 GPUs it does not have."""
    nodes = (node("n1", 4), node("n2", 4))
    pods = [admitted("w1", gang(1, 2), {"n1": 1}, {"n2": 1}),
            admitted("w2", gang(1, 2), {"n2": 1}),
            admitted("w3", gang(1, 2), {"n2": 1})]
    assert settle(nodes, pods) == {"w1": ({"n2": 1},), "w3": ({"n1": 1},)}
    state = model(nodes, pods)
    assert state.free_total(GPU) == 2, "8 GPUs, 6 admitted"
    assert state.free("n1") == {GPU: 2} and state.free("n2") == {GPU: 0}


def test_pods_bound_where_hinted_count_as_hinted() -> None:
    nodes = (node("n1", 8), node("n2", 8))
    pods = [admitted("w1", gang(2, 4), {"n1": 2}, {"n1": 2}),
            admitted("w2", gang(2, 4), {"n2": 2}, {"n2": 1})]
    assert settle(nodes, pods) == {}


def test_unbound_pods_stay_inside_their_admitted_domain() -> None:
    """Rack r1 is full of pods bound there; w2's hinted node is taken, and the free rack r2 is
    outside its pinned domain: its pod waits at its hint (a real over-commit)."""
    nodes = (node("a1", 4, rack="r1"), node("a2", 4, rack="r1"), node("b1", 4, rack="r2"))
    pods = [admitted("w1", gang(2, 4), {"a1": 1, "b1": 1}, {"a1": 1, "a2": 1}),
            admitted("w2", gang(1, 4), {"a2": 1}, domain={RACK: "r1"})]
    settled = settle(nodes, pods)
    assert settled == {"w1": ({"a1": 1, "a2": 1},)}
    assert "w2" not in settled


def test_unbound_pods_leave_a_cordoned_or_tainted_hint() -> None:
    taint = Taint("maintenance", "", "NoSchedule")
    nodes = (node("n1", 8, unschedulable=True), node("n2", 8, taints=(taint,)), node("n3", 8))
    pods = [admitted("w1", gang(2, 4), {"n1": 1, "n2": 1})]
    assert settle(nodes, pods) == {"w1": ({"n3": 2},)}


def test_a_partly_bound_gang_keeps_its_bound_pods_and_places_the_rest() -> None:
    nodes = (node("n1", 8), node("n2", 8), node("n3", 8))
    pods = [admitted("other", gang(1, 8), {"n1": 1}, {"n2": 1}),
            admitted("gang", gang(3, 4), {"n1": 1, "n2": 2}, {"n1": 1})]
    settled = settle(nodes, pods)
    assert settled["gang"] == ({"n1": 2, "n3": 1},) or settled["gang"] == ({"n1": 1, "n3": 2},)
    assert sum(settled["gang"][0].values()) == 3


@st.composite
def bursts(draw: st.DrawFn) -> tuple[tuple[Node, ...], list[AdmittedPods]]:
    """Nodes, and one-GPU gangs that fit the cluster in total, hinted anywhere, with some pods
    bound on nodes that had room for them (as kube-scheduler binds)."""
    sizes = draw(st.lists(st.integers(1, 8), min_size=1, max_size=6))
    nodes = tuple(node(f"n{i}", gpus) for i, gpus in enumerate(sizes))
    room = dict(zip((n.name for n in nodes), sizes, strict=True))
    left = sum(sizes)
    pods = []
    for i in range(draw(st.integers(0, 8))):
        count = draw(st.integers(1, 4))
        if count > left:
            break
        left -= count
        names = [n.name for n in nodes]
        hinted: dict[str, int] = {}
        for _ in range(count):
            name = draw(st.sampled_from(names))
            hinted[name] = hinted.get(name, 0) + 1
        bound: dict[str, int] = {}
        for _ in range(draw(st.integers(0, count))):
            with_room = [name for name in names if room[name] > 0]
            name = draw(st.sampled_from(with_room))
            room[name] -= 1
            bound[name] = bound.get(name, 0) + 1
        pods.append(admitted(f"w{i}", gang(count, 1), hinted, bound))
    return nodes, pods


@given(bursts())
@settings(max_examples=300, deadline=None)
def test_the_model_never_shows_room_that_the_scheduler_has_filled(
        case: tuple[tuple[Node, ...], list[AdmittedPods]]) -> None:
    """Whatever the scheduler bound where: every pod is counted once, bound pods where they
    are, and the model's free GPUs are exactly what is left (no node counted below zero while
    another shows room the unbound pods will take)."""
    nodes, pods = case
    settled = settle(nodes, pods)
    for pod in pods:
        placement = settled.get(pod.key, pod.hinted)[0]
        assert sum(placement.values()) == pod.pod_sets[0].count
        assert all(placement.get(name, 0) >= count for name, count in pod.bound[0].items())
    state = model(nodes, pods)
    capacity = sum(n.allocatable[GPU] for n in nodes)
    assert state.free_total(GPU) == capacity - sum(p.pod_sets[0].count for p in pods)


def test_pods_that_ran_to_completion_need_no_room() -> None:
    """A Job's pod succeeded and is gone from the bound pods; until its Workload is marked
    finished it is still admitted, but counting it at its hint would hold room nothing uses
    (and push the pods that do need room elsewhere)."""
    nodes = (node("n1", 4),)
    done = AdmittedPods("done", (gang(1, 4),), ({"n1": 1},), ({},), ({},), (1,))
    waiting = admitted("next", gang(1, 4), {"n1": 1})
    assert settle(nodes, [done, waiting]) == {"done": ({},)}
    assert model(nodes, [done, waiting]).free("n1") == {GPU: 0}, "only `next` holds n1"
