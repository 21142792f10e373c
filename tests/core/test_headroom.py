"""The short jobs' headroom on one node: long starts keep a node where the largest short pod
fits on GPUs idle or held by yielding work (unfunded, or resumable long work past its min
runtime on that node alone), whatever the pool counts cluster-wide, as long as the room costs
no more than it keeps. Worlds of 64 GPUs (4 racks of two 8-GPU nodes) where short jobs held 4
GPUs on average (`SHORT_GPUS`): 4 are kept, and one node keeps 4; computed by hand."""

from hypothesis import given, settings
from hypothesis import strategies as st

from admitter.core.decisions import CycleSettings, EvictionReason
from admitter.core.model import GPU, FairShareSettings, Phase, PodSet, Workload, held_per_node
from admitter.core.policy import ShortJobs

from builders.core import job, queue, racks, running_on
from builders.world import World, admitted, evicted, pending

HOUR = 3600.0
WEEK = FairShareSettings(window=7 * 86400, k_value=1.0)
NODES = [f"b0-r{r}-n{n}" for r in range(4) for n in range(2)]
FULL = NODES[:6]
"""Nodes that a's protected 8-GPU jobs fill in every world below."""
SHORT_MAX_GPUS = ShortJobs().max_gpus
SHORT_GPUS = 4.0
NO_ROOM = f"would leave no node with {SHORT_MAX_GPUS} nvidia.com/gpu idle or held by work short"


def _world(**gpus_on_rack3: int) -> World:
    """a's protected jobs (10 h) fill six nodes and hold `gpus_on_rack3` GPUs on each node of
    rack r3 (by node name); b, with nothing running, has work to submit; short jobs held
    `SHORT_GPUS` on average."""
    world = World(racks(4), [queue("a"), queue("b", order=1)])
    world.short_gpus = SHORT_GPUS
    world.submit(*(running_on(f"a{i}", "a", node, min_runtime=10 * HOUR)
                   for i, node in enumerate(FULL)),
                 *(running_on(f"a-{node}", "a", node, gpus=gpus, min_runtime=10 * HOUR)
                   for node, gpus in gpus_on_rack3.items()))
    return world


def test_a_pool_in_fragments_refuses_a_long_start():
    """2 + 2 idle GPUs: 4 in the pool (3 left after the 1-GPU start, above the 1 kept), but no
    node would hold a 4-GPU debug job. The long job waits; a short 1-GPU job still starts."""
    world = _world(**{"b0-r3-n0": 6, "b0-r3-n1": 6})
    world.submit(job("b-long", "b", gpus=1, at=1.0),
                 job("b-short", "b", gpus=1, min_runtime=600.0, resumable=False, at=2.0))
    result = world.cycle(10.0)
    assert admitted(result) == ["b-short"]
    assert pending(result) == {"b-long": "ProtectedVictims"}  # a's jobs: protected
    assert NO_ROOM in result.pending[0].message


def test_a_four_gpu_hole_permits_long_starts_elsewhere_until_the_last():
    """4 idle GPUs on n0, 2 on n1. Long 1-GPU jobs bin-pack onto n1 and keep n0's hole: the
    first two start there; the third would land on n0 and waits. A 4-GPU debug job submitted
    next finds the hole."""
    world = _world(**{"b0-r3-n0": 4, "b0-r3-n1": 6})
    world.submit(*(job(f"b-long{i}", "b", gpus=1, at=float(i)) for i in range(3)))
    result = world.cycle(10.0)
    assert admitted(result) == ["b-long0", "b-long1"]
    assert world.placement("b-long0") == world.placement("b-long1") == {"b0-r3-n1": 1}
    assert pending(result) == {"b-long2": "ProtectedVictims"}
    assert NO_ROOM in result.pending[0].message
    world.submit(job("b-debug", "b", gpus=4, min_runtime=600.0, resumable=False, at=11.0))
    later = world.cycle(20.0)
    assert admitted(later) == ["b-debug"] and world.placement("b-debug") == {"b0-r3-n0": 1}


def test_the_room_grows_to_what_short_jobs_held_on_average():
    """16 GPUs idle on rack r3. Short jobs held 14 GPUs on average over the window, so 14 are
    kept: an 8-GPU long start would leave 8, taking 6 of the room to use 2 beyond it, and
    waits; a 2-GPU one leaves 14 and starts, after which the 8-GPU one would take only room
    GPUs. With short jobs holding 4, the 8-GPU start goes ahead."""
    busy = _world(**{"b0-r3-n0": 0, "b0-r3-n1": 0})
    busy.short_gpus = 14.0
    busy.submit(job("b-8", "b", gpus=8, at=1.0), job("b-2", "b", gpus=2, at=2.0))
    result = busy.cycle(10.0)
    assert admitted(result) == ["b-2"]
    assert pending(result) == {"b-8": "ProtectedVictims"}
    assert ("14 nvidia.com/gpu are idle and 0 held by work short jobs may requeue; 8 more "
            "would leave 6, fewer than the 14 kept for short jobs (what short jobs held on "
            "average over the window: 14.0); it would take only the room's GPUs"
            ) in result.pending[0].message
    quiet = _world(**{"b0-r3-n0": 0, "b0-r3-n1": 0})
    quiet.submit(job("b-8", "b", gpus=8, at=1.0))
    assert admitted(quiet.cycle(10.0)) == ["b-8"]


def test_unfunded_work_on_a_node_counts_as_room():
    """n0 has 1 idle GPU, n1 2 idle beside b's 2-GPU unfunded job: n1 holds a 4-GPU debug job
    once the unfunded job yields, so a long 1-GPU job may take n0's last GPU."""
    world = _world(**{"b0-r3-n0": 7, "b0-r3-n1": 4})
    world.submit(running_on("b-free", "b", "b0-r3-n1", gpus=2, min_runtime=0.0),
                 job("b-long", "b", gpus=1, at=1.0))
    result = world.cycle(10.0)
    assert admitted(result) == ["b-long"] and world.placement("b-long") == {"b0-r3-n0": 1}


def test_a_long_preemptor_takes_the_cheaper_victim_while_room_remains():
    """b (20 GPU-hours used, a 1: clearly worse) runs resumable work past its min runtime: an
    8-GPU job on r0-n0 and a 4-GPU job on r0-n1 beside 4 idle GPUs there; the rest of the
    cluster is protected, with 2 idle GPUs on r1-n0. a's 8-GPU job takes the cheaper victim, the
    4-GPU job, and lands on r0-n1: the 8-GPU job past its min runtime stays the short jobs' room
    on r0-n0."""
    world = World(racks(4), [queue("a"), queue("b", order=1)],
                  settings=CycleSettings(fair_share=WEEK))
    world.usage = {"a": 1.0 * HOUR, "b": 20.0 * HOUR}
    world.submit(running_on("b-big", "b", "b0-r0-n0"),
                 running_on("b-half", "b", "b0-r0-n1", gpus=4),
                 running_on("b-frag", "b", "b0-r1-n0", gpus=6, min_runtime=10 * HOUR),
                 *(running_on(f"b{i}", "b", node, min_runtime=10 * HOUR)
                   for i, node in enumerate(NODES[3:])),
                 job("a-long", "a", at=HOUR))
    result = world.cycle(2 * HOUR)
    assert evicted(result) == {"b-half": EvictionReason.RECLAIMED}
    assert admitted(result) == ["a-long"] and world.placement("a-long") == {"b0-r0-n1": 1}


def test_long_work_past_its_min_runtime_on_one_node_counts_as_room():
    """One idle GPU on n0, none on n1, where b's resumable 4-GPU job is past its min runtime: a
    debug job could requeue it at once, so a long 1-GPU job may take n0's last idle GPU. Were
    that job protected, not resumable, or a gang also holding 4 of n0's GPUs (a short job would
    requeue a whole gang for one pod), the long job would wait."""
    def admits(min_runtime: float = HOUR, resumable: bool = True, gang: bool = False) -> bool:
        world = _world(**{"b0-r3-n0": 3 if gang else 7, "b0-r3-n1": 4})
        big = running_on("b-big", "b", "b0-r3-n1", gpus=4, min_runtime=min_runtime,
                         resumable=resumable)
        if gang:
            spread = {"b0-r3-n0": 1, "b0-r3-n1": 1}
            big = Workload("b-big", "b", (PodSet("main", 2, {GPU: 4}),), 0.0,
                           min_runtime=min_runtime, phase=Phase.ADMITTED, admitted_at=0.0,
                           placement=spread, pod_set_placements=(spread,))
        world.submit(big, job("b-long", "b", gpus=1, at=1.0))
        return admitted(world.cycle(2 * HOUR)) == ["b-long"]

    assert admits()
    assert not admits(min_runtime=10 * HOUR)
    assert not admits(resumable=False)
    assert not admits(gang=True)


HELD = st.integers(4, 8).flatmap(
    lambda funded: st.tuples(st.just(funded), st.integers(0, 8 - funded)))
"""What one node runs: a funded (protected) job of 4-8 GPUs and an unfunded one of what is left
or less, so that a node often has no room for a short pod on its own."""


@settings(max_examples=60, deadline=None)
@given(held=st.lists(HELD, min_size=8, max_size=8),
       wanted=st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4))
def test_every_long_start_leaves_a_node_for_a_short_pod(
        held: list[tuple[int, int]], wanted: list[int]) -> None:
    """Whatever runs where, after a cycle that started long work of at most 8 GPUs some node
    has `SHORT_MAX_GPUS` GPUs idle or held by unfunded work (the drain is kept out: its bound
    is never reached): such a start keeps at least as many room GPUs as it would use beyond
    them."""
    world = World(racks(4), [queue("a"), queue("b", order=1)],
                  settings=CycleSettings(starvation_bound=100 * HOUR))
    world.short_gpus = SHORT_GPUS
    for node, (funded, unfunded) in zip(NODES, held, strict=True):
        world.submit(running_on(f"{node}-funded", "a", node, gpus=funded,
                                min_runtime=10 * HOUR))
        if unfunded:
            world.submit(running_on(f"{node}-free", "a", node, gpus=unfunded, min_runtime=0.0))
    world.submit(*(job(f"b-long{i}", "b", gpus=gpus, at=float(i))
                   for i, gpus in enumerate(wanted)))
    result = world.cycle(10.0)
    if not any(key.startswith("b-long") for key in admitted(result)):
        return
    room = dict.fromkeys(NODES, 8)
    for workload in world.workloads.values():
        if workload.admitted_at is not None and workload.funded:
            for node, gpus in held_per_node(workload, GPU).items():
                room[node] -= gpus
    assert max(room.values()) >= SHORT_MAX_GPUS


def _seven_full(short_gpus: float) -> World:
    """a's protected 8-GPU jobs (10 h) fill seven nodes; b0-r3-n1 stands idle. Short jobs
    held `short_gpus` on average (a few 1-GPU jobs ran earlier: less than one GPU)."""
    world = World(racks(4), [queue("a"), queue("b", order=1)],
                  settings=CycleSettings(starvation_bound=100 * HOUR))
    world.short_gpus = short_gpus
    world.submit(*(running_on(f"a{i}", "a", node, min_runtime=10 * HOUR)
                   for i, node in enumerate(NODES[:7])))
    return world


def test_a_one_gpu_room_never_keeps_a_whole_node_idle():
    """Short jobs held a third of a GPU on average: 1 GPU is kept, on one node. An 8-GPU long
    job (above its queue's quota of nothing) would take that one GPU and the seven beside it:
    kept, the room would idle seven GPUs to keep one, so the job starts on the idle node in
    the cycle it is submitted."""
    world = _seven_full(short_gpus=0.3)
    world.submit(job("b-8", "b", at=HOUR))
    result = world.cycle(HOUR + 10)
    assert admitted(result) == ["b-8"] and world.placement("b-8") == {"b0-r3-n1": 1}
    assert "the short jobs' room is given up to it" in result.admissions[0].message


def test_a_room_short_jobs_fill_is_kept_when_it_keeps_as_much_as_it_idles():
    """Short jobs held 4 GPUs on average: 4 are kept, on one node. The 8-GPU job would take all
    4 and idle 4 beyond them: it waits, and the reason says both numbers; a 4-GPU long job,
    which leaves the other 4, starts."""
    world = _seven_full(short_gpus=4.0)
    world.submit(job("b-8", "b", at=HOUR), job("b-4", "b", gpus=4, at=HOUR + 1))
    result = world.cycle(HOUR + 10)
    assert admitted(result) == ["b-4"]
    assert pending(result) == {"b-8": "NoFit"}
    # Once b-4 has started, the 8-GPU job does not fit the 4 left: told so, not the room.
    assert result.pending[0].message == (
        "no node offers 8 nvidia.com/gpu per pod; the largest node has 4")


def test_the_room_names_what_it_keeps_and_what_it_idles():
    """As above with only the 8-GPU job: it waits for the 4 kept, which would idle 4."""
    world = _seven_full(short_gpus=4.0)
    world.submit(job("b-8", "b", at=HOUR))
    result = world.cycle(HOUR + 10)
    assert admitted(result) == [] and pending(result) == {"b-8": "NoFit"}
    assert result.pending[0].message == (
        "8 nvidia.com/gpu are idle and 0 held by work short jobs may requeue; 8 more would "
        "leave 0, fewer than the 4 kept for short jobs (what short jobs held on average over "
        "the window: 4.0); keeping them idles 4 nvidia.com/gpu beyond them")  # a's: no victims


def test_a_job_that_does_not_fit_is_told_so_in_gpus_before_the_room():
    """17 GPUs idle (two idle nodes and one beside a 7-GPU job) and 2 held by unfunded work; 4
    kept for short jobs. A 32-GPU job does not fit whatever the room: its reason says so, in
    GPUs, and names no room."""
    world = World(racks(4), [queue("a"), queue("b", order=1)],
                  settings=CycleSettings(starvation_bound=100 * HOUR))
    world.short_gpus = 4.0
    world.submit(*(running_on(f"a{i}", "a", node, min_runtime=10 * HOUR)
                   for i, node in enumerate(NODES[:4])),
                 running_on("a-six", "a", NODES[4], gpus=6, min_runtime=10 * HOUR),
                 running_on("free-two", "a", NODES[4], gpus=2, min_runtime=0.0),
                 running_on("a-seven", "a", NODES[5], gpus=7, min_runtime=10 * HOUR),
                 job("b-32", "b", pods=4, at=HOUR))
    result = world.cycle(HOUR + 10)
    assert admitted(result) == []
    message = result.pending[0].message
    assert message.startswith("the cluster has 17 free nvidia.com/gpu; 4 pods × 8 need 32")
    assert "kept for short jobs" not in message


def test_with_no_gpu_idle_the_reason_is_that_it_does_not_fit():
    """Every GPU is busy; 2 are held by unfunded work. An 8-GPU job is told that no node has
    8 free, not that 8 more would leave none for short jobs."""
    world = _seven_full(short_gpus=4.0)
    world.submit(running_on("a-last", "a", NODES[7], gpus=6, min_runtime=10 * HOUR),
                 running_on("free-two", "a", NODES[7], gpus=2, min_runtime=0.0),
                 job("b-8", "b", at=HOUR))
    result = world.cycle(HOUR + 10)
    message = {p.key: p.message for p in result.pending}["b-8"]
    assert message.startswith("no node offers 8 nvidia.com/gpu per pod; the largest node has 0")
    assert "more would leave" not in message and "kept for short jobs" not in message


def test_no_node_is_held_for_a_drained_job_that_the_room_keeps_off_it():
    """b's 8-GPU job has starved past the bound; the idle node is the drain's cheapest choice,
    but started there the job would take the 4 GPUs kept for short jobs, idling only 4:
    the room keeps it off. Held for it, the node would stand idle for nothing, so it is not
    held, and c's 4-GPU long job, which leaves the room, starts there."""
    world = _seven_full(short_gpus=4.0)
    world.settings = CycleSettings(starvation_bound=1800.0)
    world.queues.append(queue("c", order=2))
    world.submit(job("b-8", "b", at=0.0), job("c-4", "c", gpus=4, at=HOUR))
    result = world.cycle(HOUR + 10)
    assert admitted(result) == ["c-4"] and world.placement("c-4") == {"b0-r3-n1": 1}
    assert pending(result) == {"b-8": "NoFit"}  # not Reserved
