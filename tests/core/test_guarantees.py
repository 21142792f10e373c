"""Reserves are made of surplus, never of a queue's guarantee (docs/admission-cycle.md,
Guarantees): the short jobs' room and a drain's hold never refuse a start that keeps every
queue on its path within its deserved GPUs, and a swap that leaves the room as it found it is
never refused for the room. Each world is computed by hand."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from admitter.core.decisions import CycleSettings, EvictionReason
from admitter.core.model import GPU, Phase, PodSet, Workload
from admitter.core.nodes import ClusterState
from admitter.core.placement import Placement, place
from admitter.core.queue_tree import QueueTree

from builders.core import RACK, job, queue, racks, running_on
from builders.world import World, admitted, evicted, pending

HOUR = 3600.0
NODES = [f"b0-r{r}-n{n}" for r in range(4) for n in range(2)]
"""64 GPUs in 4 racks of two 8-GPU nodes: the short jobs' pool is 1 GPU, their room one node
with 4 GPUs idle or held by work they may requeue."""


def _spread(key: str, queue_name: str, nodes: list[str], *, gpus: int = 4,
            priority: int = 0) -> Workload:
    """A resumable gang of one `gpus`-GPU pod per node, admitted at 0 (protected 1 h): work
    spread over nodes, which short jobs may not requeue."""
    pods = PodSet("main", len(nodes), {GPU: gpus})
    placed = dict.fromkeys(nodes, 1)
    return Workload(key, queue_name, (pods,), 0.0, priority, HOUR, True,
                    phase=Phase.ADMITTED, admitted_at=0.0, placement=placed,
                    pod_set_placements=(placed,))


def _vision_world(quota: int) -> World:
    """`other` holds 48 GPUs on six nodes, protected until 2.5 h; two nodes (16 GPUs) are idle,
    and `vision` (GPU quota `quota`, holding nothing) submits two 8-GPU jobs."""
    world = World(racks(4), [queue("vision", quota), queue("other", order=1)])
    world.submit(*(running_on(f"other-{i}", "other", node, at=1.5 * HOUR)
                   for i, node in enumerate(NODES[2:])),
                 job("vision-1", "vision", at=2 * HOUR), job("vision-2", "vision", at=2 * HOUR))
    return world


def test_a_queue_within_its_deserved_quota_gets_the_idle_gpus_whatever_the_reserve():
    """Both 8-GPU jobs start: vision ends at 16 of its 16, although nothing is then left for
    short jobs (the pool of 1 GPU, the 4-GPU room)."""
    result = _vision_world(quota=16).cycle(2 * HOUR)
    assert admitted(result) == ["vision-1", "vision-2"]


def test_past_its_deserved_quota_a_queue_leaves_the_reserve():
    """With a quota of 8, vision is past it with its second job, which keeps the reserve:
    short jobs held 8 GPUs on average, and the job would take only the room's GPUs."""
    world = _vision_world(quota=8)
    world.short_gpus = 8.0
    result = world.cycle(2 * HOUR)
    assert admitted(result) == ["vision-1"]
    assert pending(result) == {"vision-2": "ProtectedVictims"}
    assert ("8 nvidia.com/gpu are idle and 0 held by work short jobs may requeue; 8 more "
            "would leave 0, fewer than the 8 kept for short jobs (what short jobs held on "
            "average over the window: 8.0); it would take only the room's GPUs"
            ) in result.pending[0].message
    assert "until 1970-01-01T02:30:00Z (in 30m)" in result.pending[0].message


def test_a_swap_inside_a_queue_that_takes_no_room_is_not_refused_for_it():
    """A full cluster where no work yields to short jobs: the pool is empty already. `prio`
    (no quota, so no guarantee) holds a priority-10 gang on two nodes, past its min runtime;
    its priority-50 gang of the same shape replaces it there, leaving the pool and the room
    as they were (empty)."""
    world = World(racks(4), [queue("prio"), queue("other", order=1)])
    world.submit(_spread("low", "prio", NODES[:2], gpus=8, priority=10),
                 *(running_on(f"other-{i}", "other", node, at=1.5 * HOUR)
                   for i, node in enumerate(NODES[2:])),
                 job("high", "prio", pods=2, priority=50, at=2 * HOUR))
    result = world.cycle(2 * HOUR)
    assert admitted(result) == ["high"] and list(evicted(result)) == ["low"]


def test_a_swap_that_takes_the_room_is_still_refused():
    """The same swap where the idle half of a node was the short jobs' room: the gang would
    fill it, so it waits."""
    world = World(racks(4), [queue("prio"), queue("other", order=1)])
    world.submit(_spread("low", "prio", NODES[:2], priority=10),
                 *(running_on(f"other-{i}", "other", node, at=1.5 * HOUR)
                   for i, node in enumerate(NODES[2:])),
                 job("high", "prio", pods=2, priority=50, at=2 * HOUR))
    result = world.cycle(2 * HOUR)
    assert admitted(result) == [] and evicted(result) == {}


def _full_prio_world(high: Workload) -> World:
    """`prio` (quota 16 under a 64-GPU root) holds its quota with two priority-10 gangs of two
    4-GPU pods, each spread over two nodes (so short jobs may not take them) and past its min
    runtime; `other` fills the rest, protected: nothing is idle or yields to short jobs."""
    world = World(racks(4), [queue("root", 64), queue("prio", 16, parent="root", order=1),
                             queue("other", 48, parent="root", order=2)])
    world.submit(_spread("low0", "prio", NODES[:2], priority=10),
                 _spread("low1", "prio", NODES[:2], priority=10),
                 *(running_on(f"other-{i}", "other", node, at=1.5 * HOUR)
                   for i, node in enumerate(NODES[2:])),
                 high)
    return world


def test_priority_orders_a_queue_at_its_quota_on_a_full_cluster():
    """A priority-50 gang of the same shape takes the place of one priority-10 gang: the swap
    keeps the queue at its quota and takes no room from short jobs."""
    world = _full_prio_world(job("high", "prio", gpus=4, pods=2, priority=50, at=2 * HOUR))
    result = world.cycle(2 * HOUR)
    assert admitted(result) == ["high"] and evicted(result) == {
        "low0": EvictionReason.PREEMPTED}
    assert "preempted by high (priority 50 > 10) in queue prio" in result.evictions[0].message


def test_priority_at_a_limit_takes_victims_from_any_node():
    """`capped` (quota = limit = 8) runs two priority-10 jobs of 4 GPUs on two nodes; a
    priority-50 8-GPU job fits on an idle node, and only the limit holds it back: both victims
    go, though neither frees the node it lands on."""
    world = World(racks(4), [queue("capped", 8, limit=8)])
    world.submit(running_on("low-a", "capped", NODES[0], gpus=4, min_runtime=2.0, priority=10),
                 running_on("low-b", "capped", NODES[1], gpus=4, min_runtime=2.0, priority=10),
                 job("urgent", "capped", gpus=8, min_runtime=2.0, priority=50, at=10.0))
    result = world.cycle(20.0)
    assert admitted(result) == ["urgent"]
    assert evicted(result) == {"low-a": EvictionReason.PREEMPTED,
                               "low-b": EvictionReason.PREEMPTED}


def test_priority_at_a_limit_takes_no_more_victims_than_the_limit_needs():
    """The same queue with limit 12 holding 8 (two 4-GPU jobs): an 8-GPU job exceeds it by 4,
    so one victim goes."""
    world = World(racks(4), [queue("capped", 8, limit=12)])
    world.submit(running_on("low-a", "capped", NODES[0], gpus=4, min_runtime=2.0, priority=10),
                 running_on("low-b", "capped", NODES[1], gpus=4, min_runtime=2.0, priority=10,
                            at=1.0),
                 job("urgent", "capped", gpus=8, min_runtime=2.0, priority=50, at=10.0))
    result = world.cycle(20.0)
    assert admitted(result) == ["urgent"] and len(result.evictions) == 1


def test_a_short_job_of_higher_priority_never_takes_its_queues_non_resumable_work():
    """A debug job would run minutes for hours lost: it waits for room, as from other queues."""
    world = World(racks(4), [queue("prio"), queue("other", order=1)])
    world.submit(*(running_on(f"low{i}", "prio", NODES[i], min_runtime=2.0, resumable=False,
                              priority=10) for i in range(2)),
                 *(running_on(f"other-{i}", "other", node, at=1.5 * HOUR)
                   for i, node in enumerate(NODES[2:])),
                 job("debug", "prio", gpus=2, min_runtime=300.0, priority=50, at=2 * HOUR))
    result = world.cycle(2 * HOUR)
    assert admitted(result) == [] and evicted(result) == {}


def test_a_drains_hold_gives_way_to_a_queue_within_its_deserved_quota():
    """Racks r0, r1. `gang` (queue a) needs a rack and has starved: the drain holds r0's idle
    node n0 while n1's protected work runs. `c`, with a quota of 8 and nothing held, submits an
    8-GPU job that fits only on the held node: it starts there."""
    world = World(racks(2), [queue("a"), queue("b", order=1), queue("c", 8, order=2)])
    world.submit(running_on("b-r0", "b", "b0-r0-n1", min_runtime=5 * HOUR),
                 running_on("b-r1-0", "b", "b0-r1-n0", min_runtime=5 * HOUR),
                 running_on("b-r1-1", "b", "b0-r1-n1", min_runtime=5 * HOUR),
                 job("gang", "a", pods=2, required=RACK, at=0.0))
    first = world.cycle(HOUR)
    assert pending(first)["gang"] == "Reserved"
    world.submit(job("c-job", "c", at=HOUR))
    second = world.cycle(HOUR + 60)
    assert admitted(second) == ["c-job"]
    assert world.placement("c-job") == {"b0-r0-n0": 1}
    assert "within its queues' deserved quota" in second.admissions[0].message


@st.composite
def _busy_worlds(draw: st.DrawFn) -> World:
    """A 64-GPU cluster (short jobs' pool 1 GPU) partly full of protected work, queues with
    quotas under one root, funded jobs waiting, some past the starvation bound (so drains
    hold nodes). Nothing running may be requeued in the cycle (everything is protected), so
    what a waiting job fits after the cycle is what it could have had."""
    queues = [queue("org", -1)] + [
        queue(f"q{i}", draw(st.sampled_from([0, 8, 16, 24])), parent="org", order=i + 1)
        for i in range(3)]
    world = World(racks(4), queues, settings=CycleSettings(starvation_bound=HOUR))
    for n, node in enumerate(NODES):
        for slot, gpus in enumerate(draw(st.sampled_from([(), (8,), (4,), (4, 4), (2,)]))):
            world.submit(running_on(f"run-{n}-{slot}", f"q{draw(st.integers(0, 2))}", node,
                                    gpus=gpus, min_runtime=10 * HOUR, at=HOUR))
    for i in range(draw(st.integers(1, 8))):
        world.submit(job(f"w{i}", f"q{draw(st.integers(0, 2))}",
                         gpus=draw(st.sampled_from([1, 2, 4, 8])), pods=draw(st.integers(1, 2)),
                         at=draw(st.sampled_from([0.0, 2 * HOUR])),
                         required=draw(st.sampled_from([None, RACK]))))
    return world


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=_busy_worlds())
def test_no_reserve_refuses_a_start_within_the_deserved_quota(world: World) -> None:
    """After a cycle, no waiting job whose queues would all stay within their deserved GPUs
    fits the GPUs left idle; where a drain holds nodes for a gang, the gang's own queue's jobs
    are the exception (the gang keeps its place in its queue)."""
    result = world.cycle(2.5 * HOUR)
    admitted_now = {w.key: w for w in world.workloads.values() if w.phase is Phase.ADMITTED}
    state = ClusterState(world.nodes, world.topology, list(admitted_now.values()))
    tree = QueueTree(world.queues)
    funded: dict[str, int] = {}
    for running in admitted_now.values():
        for name in tree.path(running.queue):
            funded[name] = funded.get(name, 0) + running.requests().get(GPU, 0)
    drained = {p.queue for p in result.pending if p.reason == "Reserved"}
    for waiting in result.pending:
        candidate = world.workloads[waiting.key]
        need = candidate.requests().get(GPU, 0)
        within = all(funded.get(name, 0) + need <= result.fair_share.shares[name][GPU].deserved
                     for name in tree.path(candidate.queue))
        if within and candidate.queue not in drained:
            assert not isinstance(place(state, candidate), Placement), (
                f"{waiting.key} fits and is within its deserved quota: {waiting.message}")
