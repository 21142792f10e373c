"""The scheduling contract's rule, case by case, on small worlds computed by hand: allocations
ranked by funded GPU time against their GPU budget, running work requeued past its min runtime
for a clearly better-ranked allocation, cheapest victims first, short jobs' headroom, drains."""

from dataclasses import replace

from admitter.core.decisions import CycleSettings, EvictionReason
from admitter.core.model import GPU, FairShareSettings, Phase, PodSet, Workload

from builders.core import RACK, job, queue, racks, running_on
from builders.world import World, admitted, evicted, pending

HOUR = 3600.0
WEEK = FairShareSettings(window=7 * 86400, k_value=1.0)


def _used(**gpu_hours: float) -> dict[str, float]:
    """Funded GPU-hours per queue inside the window, as GPU-seconds (the same at every cycle:
    the ranks stay put while the tests' clock moves)."""
    return {q: hours * HOUR for q, hours in gpu_hours.items()}


def _two_teams(gpus_a: float, gpus_b: float, *, nodes: int = 1) -> World:
    """Teams a and b with equal budgets; b's resumable job has run on the one node since t=0
    (min runtime 1 h), a waits for a node (not long enough to starve); the window saw a use
    `gpus_a` GPU-hours, b `gpus_b`."""
    world = World(racks(1, nodes_per_rack=nodes), [queue("a", order=0), queue("b", order=1)],
                  settings=CycleSettings(fair_share=WEEK, starvation_bound=10 * HOUR))
    world.submit(*(job(f"b{i}", "b", at=float(i)) for i in range(nodes)))
    world.cycle(0.0)
    world.usage = _used(a=gpus_a, b=gpus_b)
    world.submit(job("a0", "a", at=10.0))
    return world


def test_no_swap_within_the_margin():
    world = _two_teams(10.0, 10.4)  # b has used 4 % more of its budget than a
    result = world.cycle(2 * HOUR)
    assert result.evictions == () and pending(result) == {"a0": "NoFit"}


def test_swap_past_min_runtime_beyond_the_margin_and_no_swap_back():
    world = _two_teams(10.0, 11.0)  # 10 % more: clearly worse
    early = world.cycle(HOUR / 2)
    assert early.evictions == () and pending(early) == {"a0": "ProtectedVictims"}
    assert early.next_change == HOUR  # b0's protection ends
    result = world.cycle(2 * HOUR)
    assert admitted(result) == ["a0"] and evicted(result) == {"b0": EvictionReason.RECLAIMED}
    assert "queue b's allocation has used more of its GPU budget than a's" in (
        result.evictions[0].message)
    # the use over the window is unchanged: b's job does not take the node back
    again = world.cycle(4 * HOUR)
    assert again.evictions == () and world.running() == ["a0"]


def test_budgets_are_gpu_budgets():
    """CPU is not budgeted: no implicit equal CPU share keeps a's CPU-heavy job out, although
    b asks for CPU too (fair share would split the 96 cores 48 : 48)."""
    world = World(racks(1, nodes_per_rack=1), [queue("a", weight=3.0), queue("b", order=1)])
    cpu_heavy = Workload("a-cpu", "a", (PodSet("main", 1, {GPU: 2, "cpu": 80_000}),), 0.0,
                         min_runtime=HOUR)
    world.submit(cpu_heavy, Workload("b-cpu", "b", (PodSet("main", 1, {GPU: 2, "cpu": 60_000}),),
                                     1.0, min_runtime=HOUR))
    result = world.cycle(0.0)
    assert result.fair_share.share("a", "cpu") < 80_000
    assert admitted(result) == ["a-cpu"]
    assert pending(result) == {"b-cpu": "NoFit"}  # placement: 16 cores left on the node


def test_cheapest_victims_first_resumable_then_fewest_gpus():
    """b (clearly worse ranked) runs a non-resumable 8-GPU job on n0, two resumable 4-GPU jobs
    on n1 and one resumable 8-GPU job on n2; a's 4-GPU job takes one 4-GPU job."""
    world = World(racks(1, nodes_per_rack=3), [queue("a"), queue("b", order=1)],
                  settings=CycleSettings(fair_share=WEEK))
    world.usage = _used(a=1.0, b=20.0)
    world.submit(running_on("keep", "b", "b0-r0-n0", resumable=False),
                 running_on("small0", "b", "b0-r0-n1", gpus=4),
                 running_on("small1", "b", "b0-r0-n1", gpus=4, at=1.0),
                 running_on("big", "b", "b0-r0-n2"),
                 job("a0", "a", gpus=4, at=10.0))
    result = world.cycle(2 * HOUR)
    assert admitted(result) == ["a0"]
    # the most recently started of the two
    assert evicted(result) == {"small1": EvictionReason.RECLAIMED}


def test_non_resumable_work_only_for_a_much_larger_rank_gap():
    def outcome(b_used: float, a_used: float = 1.0) -> dict[str, str]:
        world = World(racks(1, nodes_per_rack=1), [queue("a"), queue("b", order=1)],
                      settings=CycleSettings(fair_share=WEEK))
        world.usage = _used(a=a_used, b=b_used)
        world.submit(running_on("keep", "b", "b0-r0-n0", resumable=False), job("a0", "a", at=9.0))
        return evicted(world.cycle(2 * HOUR))

    assert outcome(5.0) == {}  # 5 × a's use: beyond the swap margin, not ten times
    # The gap is judged with a0's protected run charged to a: 1 + 8 GPUs × 1 h = 9 GPU-hours.
    assert outcome(80.0) == {}  # 80 × a's use so far, under 10 × 9 once a0 has run
    assert outcome(100.0) == {"keep": EvictionReason.RECLAIMED}
    # An allocation that has used nothing yet is not infinitely far below b: its first job's
    # protected run is what it is compared with.
    assert outcome(5.0, a_used=0.0) == {}
    assert outcome(81.0, a_used=0.0) == {"keep": EvictionReason.RECLAIMED}


def test_short_job_displaces_resumable_work_of_any_allocation_never_protected():
    """b is the better-ranked allocation; a's debug job (1 GPU, 10 min) still takes the node of
    b's resumable job past its min runtime, never the protected one."""
    world = World(racks(1, nodes_per_rack=2), [queue("a"), queue("b", order=1)],
                  settings=CycleSettings(fair_share=WEEK))
    world.usage = _used(a=20.0, b=1.0)
    world.submit(running_on("past", "b", "b0-r0-n0"),
                 running_on("protected", "b", "b0-r0-n1", min_runtime=8 * HOUR),
                 job("debug", "a", gpus=1, min_runtime=600.0, resumable=False, at=10.0))
    result = world.cycle(2 * HOUR)
    assert admitted(result) == ["debug"] and evicted(result) == {"past": EvictionReason.RECLAIMED}
    assert "a short job may requeue resumable work" in result.evictions[0].message


def _gang_and_a_debug_job(a_used: float, b_used: float, debug_queue: str = "a",
                          ) -> dict[str, EvictionReason]:
    """b's resumable 2-node gang (priority 0) has run on both nodes since t=0 (min runtime 1 h);
    at 2 h a debug job (1 GPU, 10 min, priority 50) of `debug_queue` finds no idle GPU. What
    its cycle evicts."""
    world = World(racks(1, nodes_per_rack=2), [queue("a"), queue("b", order=1)],
                  settings=CycleSettings(fair_share=WEEK))
    world.usage = _used(a=a_used, b=b_used)
    world.submit(Workload("b-gang", "b", (PodSet("main", 2, {GPU: 8}),), 0.0, min_runtime=HOUR,
                          phase=Phase.ADMITTED, admitted_at=0.0,
                          placement={"b0-r0-n0": 1, "b0-r0-n1": 1},
                          pod_set_placements=({"b0-r0-n0": 1, "b0-r0-n1": 1},)),
                 job("debug", debug_queue, gpus=1, min_runtime=600.0, resumable=False,
                     priority=50, at=10.0))
    return evicted(world.cycle(2 * HOUR))


def test_short_job_takes_a_gang_on_several_nodes_only_as_time_slicing_would():
    """A debug job would requeue b's whole gang for one pod, and the gang could start again
    only once both nodes are free together (a drain, on a full cluster): it takes the gang only
    from an allocation clearly worse ranked than its own (beyond the swap margin): not from a
    better-ranked one (whose one-node job it would take, see above), nor within the margin, nor
    from its own queue by priority."""
    assert _gang_and_a_debug_job(a_used=20.0, b_used=1.0) == {}
    assert _gang_and_a_debug_job(a_used=10.0, b_used=10.4) == {}
    assert _gang_and_a_debug_job(a_used=10.0, b_used=10.0, debug_queue="b") == {}
    assert _gang_and_a_debug_job(a_used=1.0, b_used=20.0) == {"b-gang": EvictionReason.RECLAIMED}


def test_long_work_leaves_the_short_jobs_headroom():
    """A long start must leave 2 % of the GPUs (here 1 of 64) idle or unfunded: the 1-GPU long
    job, which would take only that GPU, waits; a short job arriving next takes it, and the
    long job is then told it does not fit."""
    world = World(racks(4), [queue("a"), queue("b", order=1)])
    nodes = [f"b0-r{r}-n{n}" for r in range(4) for n in range(2)]
    world.submit(*(running_on(f"a{i}", "a", node, gpus=7 if i == 7 else 8)
                   for i, node in enumerate(nodes)))
    world.submit(job("b-long", "b", gpus=1, at=8.0))
    result = world.cycle(10.0)
    assert admitted(result) == []
    assert pending(result) == {"b-long": "ProtectedVictims"}  # a's jobs: protected
    assert ("1 more would leave 0, fewer than the 1 kept for short jobs (2% of the schedulable "
            "nvidia.com/gpu); it would take only the room's GPUs") in result.pending[0].message
    world.submit(job("b-short", "b", gpus=1, min_runtime=300.0, at=11.0))
    later = world.cycle(20.0)
    assert admitted(later) == ["b-short"]
    assert later.pending[0].message.startswith(
        "no node offers 1 nvidia.com/gpu per pod; the largest node has 0")


def _drain_world() -> World:
    """Racks r0 and r1 of two 8-GPU nodes, all held by b, which has used 3 % more of its budget
    than a: not clearly worse (no swap), but worse. r0: b-past (past its min runtime) and
    b-soon (protected until 2 h); r1: protected until 5 h. a's 2-node gang needs a rack and has
    waited past the 30 min starvation bound."""
    world = World(racks(2), [queue("a"), queue("b", order=1)],
                  settings=CycleSettings(fair_share=WEEK))
    world.usage = _used(a=10.0, b=10.3)
    world.submit(running_on("b-past", "b", "b0-r0-n0"),
                 running_on("b-soon", "b", "b0-r0-n1", min_runtime=2 * HOUR),
                 running_on("b-late0", "b", "b0-r1-n0", min_runtime=5 * HOUR),
                 running_on("b-late1", "b", "b0-r1-n1", min_runtime=5 * HOUR),
                 job("gang", "a", pods=2, required=RACK, at=0.0))
    return world


def test_rack_drain_for_a_starving_gang_without_flip_flopping():
    """r0 is the cheapest rack to empty (8 GPUs could go now, r1's none). Its occupants keep
    running (no GPU is left idle) until the last protection ends; then both leave at once."""
    world = _drain_world()
    first = world.cycle(HOUR)
    assert first.evictions == () and admitted(first) == []
    assert pending(first)["gang"] == "Reserved"
    assert "reserved for gang: b0-r0-n0, b0-r0-n1" in first.pending[0].message
    assert first.pending[0].retry_at == 2 * HOUR and first.next_change == 2 * HOUR
    # new long work does not land on the drained rack, and the target stays put
    world.finish("b-late1")
    world.submit(job("b-new", "b", at=HOUR + 1))
    for now in (HOUR + 10, 1.5 * HOUR):
        result = world.cycle(now)
        assert result.evictions == ()
        assert "reserved for gang: b0-r0-n0, b0-r0-n1" in {
            p.key: p for p in result.pending}["gang"].message
    assert world.placement("b-new") == {"b0-r1-n1": 1}
    done = world.cycle(2 * HOUR)
    assert evicted(done) == {"b-past": EvictionReason.RECLAIMED, "b-soon": EvictionReason.RECLAIMED}
    assert all("drained for that starving gang" in e.message for e in done.evictions)
    assert admitted(done) == ["gang"]
    assert set(world.placement("gang")) == {"b0-r0-n0", "b0-r0-n1"}


def test_the_drain_serves_the_starving_gang_of_the_team_that_used_the_least():
    """Both racks are held by c (clearly worse ranked), protected until 2 h. a's and b's 2-node
    gangs need a rack and have waited past the starvation bound; a's is the older, but a has
    used 3 % more of its budget than b (within the margin: neither is over-served). The one
    drain goes to b's gang: the drain is how a gang's team gets what it is owed, and waiting
    time alone would hand it to whoever submitted first (measured on the family: teams whose
    gangs came late in the week got no drain at all)."""
    world = World(racks(2), [queue("a"), queue("b", order=1), queue("c", order=2)],
                  settings=CycleSettings(fair_share=WEEK))
    world.usage = _used(a=10.3, b=10.0, c=30.0)
    world.submit(*(running_on(f"c{i}", "c", node, min_runtime=2 * HOUR)
                   for i, node in enumerate(["b0-r0-n0", "b0-r0-n1", "b0-r1-n0", "b0-r1-n1"])),
                 job("a-gang", "a", pods=2, required=RACK, at=0.0),
                 job("b-gang", "b", pods=2, required=RACK, at=100.0))
    result = world.cycle(HOUR)
    assert result.evictions == () and admitted(result) == []
    assert pending(result)["b-gang"] == "Reserved" and pending(result)["a-gang"] != "Reserved"


def test_priority_preemption_inside_a_queue_at_its_limit():
    """quota 16, limit 16: the queue is at its limit with two low-priority jobs past their
    min runtime; the high-priority job preempts one instead of waiting on LimitExceeded."""
    world = World(racks(2), [queue("q", 16, limit=16)])
    world.submit(job("low0", "q", priority=0, at=0.0), job("low1", "q", priority=0, at=1.0))
    world.cycle(0.0)
    world.submit(job("high", "q", priority=50, at=2.0))
    early = world.cycle(HOUR / 2)
    assert admitted(early) == [] and pending(early) == {"high": "ProtectedVictims"}
    result = world.cycle(HOUR)
    assert admitted(result) == ["high"] and evicted(result) == {"low1": EvictionReason.PREEMPTED}
    assert "priority 50 > 0" in result.evictions[0].message


def test_priority_preemption_at_a_limit_with_a_headroom_kept_elsewhere():
    """64 GPUs keep a 1-GPU headroom for short jobs. The node the victim frees need not hold
    it too: the 48 idle GPUs elsewhere already do, so the high-priority job still preempts."""
    world = World(racks(4), [queue("q", 16, limit=16)])
    world.submit(job("low0", "q", priority=10, at=0.0, min_runtime=2.0),
                 job("low1", "q", priority=10, at=1.0, min_runtime=2.0))
    world.cycle(0.0)
    world.submit(job("high", "q", priority=50, at=5.0, min_runtime=2.0))
    result = world.cycle(20.0)
    assert admitted(result) == ["high"] and evicted(result) == {"low1": EvictionReason.PREEMPTED}


def test_short_job_never_takes_long_non_resumable_work():
    """b has used 100 GPU-hours, a 1: beyond the ten-times gap for non-resumable work even with
    a's long job's protected run charged (9): a's long job takes b's non-resumable job, a's
    debug job does not (minutes gained, hours lost)."""
    def outcome(preemptor: Workload) -> dict[str, str]:
        world = World(racks(1, nodes_per_rack=1), [queue("a"), queue("b", order=1)],
                      settings=CycleSettings(fair_share=WEEK))
        world.usage = _used(a=1.0, b=100.0)
        world.submit(running_on("keep", "b", "b0-r0-n0", resumable=False), preemptor)
        return evicted(world.cycle(2 * HOUR))

    assert outcome(job("long", "a", at=9.0)) == {"keep": EvictionReason.RECLAIMED}
    assert outcome(job("debug", "a", gpus=1, min_runtime=600.0, resumable=False, at=9.0)) == {}


def _three_teams() -> World:
    """Racks r0 and r1 of two 8-GPU nodes. c (ranked best: half a's use) runs two resumable
    jobs past their min runtime on r0; b (3 % more use than a: worse, not clearly) runs one
    past it and one protected until 2 h on r1. a's 2-node gang needs a rack and starves."""
    world = World(racks(2), [queue("a"), queue("b", order=1), queue("c", order=2)],
                  settings=CycleSettings(fair_share=WEEK))
    world.usage = _used(a=10.0, b=10.3, c=5.0)
    world.submit(running_on("c-past0", "c", "b0-r0-n0"), running_on("c-past1", "c", "b0-r0-n1"),
                 running_on("b-past", "b", "b0-r1-n0"),
                 running_on("b-soon", "b", "b0-r1-n1", min_runtime=2 * HOUR),
                 job("gang", "a", pods=2, required=RACK, at=0.0))
    return world


def test_drain_chooses_the_domain_its_gang_may_empty():
    """r0 has more GPUs past their min runtime, but they are the better-ranked c's, which a
    drain for a never takes: r0 would empty only as c's jobs finish. r1 is drained instead.
    c wants nothing more (no work waiting), so a's use above c's does not make a over-served."""
    world = _three_teams()
    first = world.cycle(HOUR)
    assert first.evictions == () and pending(first) == {"gang": "Reserved"}
    assert "reserved for gang: b0-r1-n0, b0-r1-n1" in first.pending[0].message
    done = world.cycle(2 * HOUR)
    assert evicted(done) == {"b-past": EvictionReason.RECLAIMED, "b-soon": EvictionReason.RECLAIMED}
    assert admitted(done) == ["gang"]


def test_no_drain_for_an_allocation_clearly_ahead_of_one_that_waits():
    """The same, but c has long work waiting (too large to run): a, at twice c's use, is
    over-served, and its gang gets no drain."""
    world = _three_teams()
    world.submit(job("c-wait", "c", pods=5, at=0.0))
    result = world.cycle(HOUR)
    assert result.evictions == () and pending(result)["gang"] != "Reserved"


def test_short_job_on_a_drained_node_does_not_turn_the_drain_away():
    """r0: b's job past its min runtime on n0, b's non-resumable debug job (4 GPUs, 10 min)
    on n1 beside 4 idle GPUs; r1: non-resumable work protected for hours. The debug job ends
    within minutes, so r0 can still be emptied and is drained; once it ends, the gang starts."""
    world = World(racks(2), [queue("a"), queue("b", order=1)],
                  settings=CycleSettings(fair_share=WEEK))
    world.usage = _used(a=10.0, b=10.3)
    world.submit(running_on("b-past", "b", "b0-r0-n0"),
                 running_on("b-debug", "b", "b0-r0-n1", gpus=4, min_runtime=600.0,
                          resumable=False, at=HOUR - 60),
                 running_on("b-late0", "b", "b0-r1-n0", resumable=False, min_runtime=5 * HOUR),
                 running_on("b-late1", "b", "b0-r1-n1", resumable=False, min_runtime=5 * HOUR),
                 job("gang", "a", pods=2, required=RACK, at=0.0))
    first = world.cycle(HOUR)
    assert first.evictions == () and pending(first) == {"gang": "Reserved"}
    assert "reserved for gang: b0-r0-n0, b0-r0-n1" in first.pending[0].message
    world.finish("b-debug")
    done = world.cycle(HOUR + 300)
    assert evicted(done) == {"b-past": EvictionReason.RECLAIMED} and admitted(done) == ["gang"]


def _drained_gang(idle_beside: int) -> World:
    """256 GPUs (16 racks of two 8-GPU nodes) keep a 5-GPU headroom. b (ranked by what it
    holds: worse than a) fills every node for 10 h but three: b0-r15-n1 is free, b0-r15-n0's
    job is protected for 1 h, and b0-r0-n0's job leaves `idle_beside` GPUs idle. a's 2-node
    gang needs a rack: once past the starvation bound it drains r15."""
    world = World(racks(16), [queue("a"), queue("b", order=1)],
                  settings=CycleSettings(fair_share=FairShareSettings(window=0),
                                         starvation_bound=1800.0))
    nodes = [f"b0-r{r}-n{n}" for r in range(16) for n in range(2)]
    world.submit(*(running_on(f"b{i}", "b", node, gpus=8 - idle_beside if node == "b0-r0-n0"
                              else 8, min_runtime=HOUR if node == "b0-r15-n0" else 10 * HOUR)
                   for i, node in enumerate(nodes) if node != "b0-r15-n1"),
                 job("gang", "a", pods=2, required=RACK, at=0.0))
    reserved = world.cycle(1801.0)
    assert pending(reserved)["gang"] == "Reserved"
    assert "reserved for gang: b0-r15-n1, b0-r15-n0" in {
        p.key: p for p in reserved.pending}["gang"].message
    return world


def test_the_drained_gang_may_take_the_pool_but_not_the_last_short_pod_room():
    """Once r15's occupant's protection ends the gang takes the whole rack although only 4
    GPUs stay idle outside it, fewer than the 5 kept: the drain's target is exempt from that
    count. Those 4 GPUs are on one node, where a 4-GPU debug job still fits."""
    world = _drained_gang(idle_beside=4)
    done = world.cycle(HOUR + 1)
    assert evicted(done) == {"b30": EvictionReason.RECLAIMED}
    assert admitted(done) == ["gang"]
    assert set(world.placement("gang")) == {"b0-r15-n0", "b0-r15-n1"}


def test_the_drained_gang_takes_the_last_short_pod_room_where_keeping_it_idles_more():
    """The same with 2 GPUs idle outside r15: the gang would leave no node where a 4-GPU debug
    job fits, but keeping that room would idle the gang's 12 other GPUs on the held rack (and
    no short-job demand backs it): the gang starts once r15's occupant's protection ends."""
    world = _drained_gang(idle_beside=2)
    done = world.cycle(HOUR + 1)
    assert evicted(done) == {"b30": EvictionReason.RECLAIMED} and admitted(done) == ["gang"]


def test_drain_holds_the_nodes_it_can_empty_not_those_with_work_that_stays():
    """One rack of three 8-GPU nodes; a's 2-node gang needs the rack and starves. n0: b's
    non-resumable job (2 GPUs, 10 h) beside 6 idle GPUs: the drain neither takes nor waits for
    it. n1 and n2: a's own resumable work, which the drain waits for (n1's ends at 1.5 h, n2's
    halves at 1.5 h and 2.5 h). Ranked by free GPUs alone, n0 would be held with n1; n2's GPUs
    freed at 1.5 h would go to b's new non-resumable job, and the gang would wait for work that
    runs for hours. The emptiable n1 and n2 are held instead: b's job lands on n0's idle GPUs,
    and the gang starts as soon as a's work on n2 ends."""
    world = World(racks(1, nodes_per_rack=3), [queue("a"), queue("b", order=1)],
                  settings=CycleSettings(fair_share=WEEK))
    world.usage = _used(a=10.0, b=10.3)
    world.submit(running_on("b-stays", "b", "b0-r0-n0", gpus=2, resumable=False,
                            min_runtime=10 * HOUR),
                 running_on("a-one", "a", "b0-r0-n1", min_runtime=5 * HOUR),
                 running_on("a-half0", "a", "b0-r0-n2", gpus=4, min_runtime=5 * HOUR),
                 running_on("a-half1", "a", "b0-r0-n2", gpus=4, min_runtime=5 * HOUR),
                 job("gang", "a", pods=2, required=RACK, at=0.0))
    first = world.cycle(HOUR)
    assert first.evictions == () and pending(first) == {"gang": "Reserved"}
    assert "reserved for gang: b0-r0-n1, b0-r0-n2" in first.pending[0].message
    world.finish("a-one")
    world.finish("a-half0")
    world.submit(job("b-new", "b", gpus=4, resumable=False, at=1.5 * HOUR - 10))
    later = world.cycle(1.5 * HOUR)
    assert admitted(later) == ["b-new"] and world.placement("b-new") == {"b0-r0-n0": 1}
    assert "reserved for gang: b0-r0-n1, b0-r0-n2" in {
        p.key: p for p in later.pending}["gang"].message
    world.finish("a-half1")
    done = world.cycle(2.5 * HOUR)
    assert done.evictions == () and admitted(done) == ["gang"]
    assert set(world.placement("gang")) == {"b0-r0-n1", "b0-r0-n2"}


def test_a_drain_for_a_gang_naming_a_resource_no_node_has_with_amount_0():
    """Kubernetes accepts a request of 0 for any resource name: the drain still chooses its
    nodes (it used to fail on the resource the nodes lack, and with it the whole cycle)."""
    world = _drain_world()
    gang = world.workloads["gang"]
    world.workloads["gang"] = replace(gang, pod_sets=(replace(
        gang.pod_sets[0], requests={GPU: 8, "example.com/nic": 0}),))
    first = world.cycle(HOUR)
    assert pending(first)["gang"] == "Reserved"
    assert "reserved for gang: b0-r0-n0, b0-r0-n1" in first.pending[0].message
