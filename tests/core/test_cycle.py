"""The admission cycle, rule by rule, on small worlds whose outcome is computed by hand."""

from dataclasses import replace

import pytest

from admitter.core.decisions import CycleSettings, EvictionReason
from admitter.core.model import GPU, FairShareSettings, Phase, Workload

from builders.core import RACK, job, queue, racks
from builders.world import World, admitted, evicted, pending

HOUR = 3600.0


def test_admits_every_workload_that_fits_in_one_cycle():
    world = World(racks(2), [queue("a", 32)]).submit(*(job(f"j{i}", "a", at=i) for i in range(4)))
    assert admitted(world.cycle(0)) == ["j0", "j1", "j2", "j3"]


def test_gang_is_all_or_nothing():
    world = World(racks(1), [queue("a", 32)]).submit(job("big", "a", pods=3))
    result = world.cycle(0)
    assert admitted(result) == []
    assert pending(result) == {"big": "NeverFits"}  # 24 GPUs on a cluster of 16
    assert "16 free nvidia.com/gpu" in result.pending[0].message
    assert "3 pods × 8 need 24" in result.pending[0].message


def test_required_rack_picks_the_rack_that_fits_and_hints_it():
    world = World(racks(2), [queue("a", 32)]).submit(job("one", "a", gpus=4, at=0))
    world.cycle(0)
    world.submit(job("pair", "a", pods=2, at=1, required=RACK))
    result = world.cycle(1)
    assert admitted(result) == ["pair"]
    assert result.admissions[0].affinity[RACK] == "r1"
    assert result.admissions[0].pod_set_nodes == ({"b0-r1-n0": 1, "b0-r1-n1": 1},)


def test_required_rack_that_no_rack_can_hold_names_the_level():
    world = World(racks(2), [queue("a", 32)]).submit(job("wide", "a", pods=3, required=RACK))
    result = world.cycle(0)
    assert pending(result) == {"wide": "NeverFits"}  # 3 nodes' worth in racks of 2
    assert "rack (topology.admitter.dev/rack)" in result.pending[0].message


def test_fair_share_splits_a_contended_cluster_by_quota():
    world = World(racks(2), [queue("a", 16, order=0), queue("b", 16, order=1)])
    world.submit(*(job(f"a{i}", "a", at=i) for i in range(4)))
    world.submit(*(job(f"b{i}", "b", at=i) for i in range(4)))
    result = world.cycle(0)
    assert sorted(admitted(result)) == ["a0", "a1", "b0", "b1"]
    assert result.fair_share.share("a", GPU) == 16
    assert result.queues["a"].allocated == {GPU: 16}
    assert result.queues["a"].pending == 2 and result.queues["a"].admitted == 2
    assert {p.key: p.position for p in result.pending} == {"a2": 3, "a3": 4, "b2": 3, "b3": 4}


def test_queue_below_its_share_is_served_first():
    world = World(racks(1), [queue("a", 8, order=0), queue("b", 8, order=1)])
    world.submit(job("a0", "a", at=0)).cycle(0)
    world.submit(job("a1", "a", at=1), job("b0", "b", at=2))
    assert admitted(world.cycle(1)) == ["b0"]


@pytest.fixture
def borrowed():
    """Team b borrowed the whole idle cluster at t=0 (team a had no demand)."""
    world = World(racks(2), [queue("a", 16, order=0), queue("b", 16, order=1)])
    world.submit(*(job(f"b{i}", "b", at=i, min_runtime=HOUR) for i in range(4)))
    assert len(admitted(world.cycle(0))) == 4
    return world


def test_reclaim_waits_for_min_runtime_then_takes_back_the_quota(borrowed):
    borrowed.submit(job("a0", "a", pods=2, at=60, required=RACK))
    early = borrowed.cycle(60)
    assert admitted(early) == [] and early.evictions == ()
    assert pending(early) == {"a0": "ProtectedVictims"}
    assert early.pending[0].retry_at == HOUR
    late = borrowed.cycle(HOUR)
    assert admitted(late) == ["a0"]
    assert evicted(late) == {"b2": EvictionReason.RECLAIMED, "b3": EvictionReason.RECLAIMED}
    assert all(e.preemptor == "a0" for e in late.evictions)
    assert "queue b's allocation has used more of its GPU budget than a's" in (
        late.evictions[0].message)


def test_reclaim_evicts_the_minimal_set(borrowed):
    borrowed.submit(job("a0", "a", at=60))
    result = borrowed.cycle(HOUR)
    assert admitted(result) == ["a0"]
    assert list(evicted(result)) == ["b3"]


def test_no_swap_between_allocations_ranked_alike():
    world = World(racks(2), [queue("a", 16, order=0), queue("b", 16, order=1)])
    world.submit(*(job(f"b{i}", "b", at=i) for i in range(2)))
    world.submit(*(job(f"a{i}", "a", at=i) for i in range(2)))
    world.cycle(0)
    world.submit(job("a2", "a", at=10 * HOUR - 5))
    result = world.cycle(10 * HOUR)
    assert result.evictions == ()
    assert pending(result) == {"a2": "NoFit"}


def test_preempt_inside_a_queue_by_priority_only():
    world = World(racks(1), [queue("a", 16)])
    world.submit(job("low", "a", at=0, priority=1, min_runtime=60))
    world.submit(job("mid", "a", at=1, priority=5, min_runtime=60))
    world.cycle(0)
    world.submit(job("high", "a", at=100, priority=9), job("same", "a", at=101, priority=5))
    result = world.cycle(120)
    assert admitted(result) == ["high"]
    assert evicted(result) == {"low": EvictionReason.PREEMPTED}
    assert "priority 9 > 1" in result.evictions[0].message
    assert pending(result)["same"] in ("NoFit", "QuotaExceeded")


def test_unfunded_work_uses_idle_capacity_and_yields_at_once():
    world = World(racks(1), [queue("a", 8, order=0), queue("b", 8, order=1)])
    world.submit(job("free", "b", pods=2, min_runtime=0, at=0))
    result = world.cycle(0)
    assert admitted(result) == ["free"] and "unfunded" in result.admissions[0].message
    world.submit(job("paid", "a", at=1))
    result = world.cycle(1)
    assert admitted(result) == ["paid"]
    assert evicted(result) == {"free": EvictionReason.RECLAIMED}


def test_unfunded_work_never_preempts():
    world = World(racks(1), [queue("a", 16)]).submit(job("paid", "a", pods=2, min_runtime=1))
    world.cycle(0)
    world.submit(job("free", "a", min_runtime=0, priority=99, at=1))
    result = world.cycle(HOUR)
    assert result.evictions == () and pending(result) == {"free": "NoFit"}


def test_funded_work_displaces_unfunded_work_whatever_its_rank():
    world = World(racks(1, nodes_per_rack=3),
                  [queue("a", 8, order=0), queue("b", 16, order=1), queue("c", 0, order=2)])
    world.submit(job("a1", "a"), job("b1", "b"), job("free", "c", min_runtime=0))
    assert admitted(world.cycle(0)) == ["a1", "b1", "free"]
    # a holds twice its budget's part and still takes the unfunded job's node
    world.submit(job("a2", "a", at=HOUR), job("b-big", "b", pods=2, required=RACK, at=HOUR))
    result = world.cycle(HOUR)
    assert admitted(result) == ["a2"]
    assert evicted(result) == {"free": EvictionReason.RECLAIMED}
    assert result.evictions[0].message == "unfunded workload evicted for funded a2"
    assert pending(result) == {"b-big": "NoFit"}


def _running(workload: Workload, node: str, at: float) -> Workload:
    return replace(workload, phase=Phase.ADMITTED, admitted_at=at, placement={node: 1},
                   pod_set_placements=({node: 1},))


def test_single_pod_preemptor_takes_victims_from_one_node():
    """n0: an unfunded 4-GPU job and 4 idle GPUs; n1: a newer unfunded 4-GPU job beside a
    protected funded one. The newer job ranks first as a victim, but evicting it frees no
    node for an 8-GPU pod: the victim must come from the node that can then hold it."""
    world = World(racks(1), [queue("a", 16)])
    world.submit(_running(job("old-free", "a", 4, min_runtime=0), "b0-r0-n0", 0),
                 _running(job("new-free", "a", 4, min_runtime=0, at=5), "b0-r0-n1", 5),
                 _running(job("paid", "a", 4), "b0-r0-n1", 5),
                 job("big", "a", 8, at=10))
    result = world.cycle(20)
    assert admitted(result) == ["big"]
    assert evicted(result) == {"old-free": EvictionReason.PREEMPTED}
    assert result.admissions[0].pod_set_nodes == ({"b0-r0-n0": 1},)


def test_funded_work_comes_before_unfunded_for_idle_capacity():
    world = World(racks(1), [queue("a", 0, order=0), queue("b", 0, order=1)])
    world.submit(job("free", "a", min_runtime=0, at=0), job("paid", "b", pods=2, at=5))
    assert admitted(world.cycle(10)) == ["paid"]


def test_long_non_preemptible_work_stays_within_fair_share_and_is_never_evicted():
    world = World(racks(2), [queue("a", 16, order=0), queue("b", 16, order=1)])
    world.submit(job("a0", "a", pods=2, at=0))
    world.submit(*(job(f"serve{i}", "b", priority=100, at=i + 1) for i in range(3)))
    result = world.cycle(0)
    assert admitted(result) == ["a0", "serve0", "serve1"]
    assert pending(result) == {"serve2": "QuotaExceeded"}
    assert "fair share of 16" in result.pending[0].message
    world.finish("a0")
    world.submit(job("a1", "a", pods=4, at=2))
    assert world.cycle(10 * HOUR).evictions == ()


def test_drain_waits_for_min_runtime():
    world = World(racks(1), [queue("a", 16)]).submit(job("j", "a", min_runtime=HOUR))
    world.cycle(0)
    world.cordon(next(iter(world.placement("j"))))
    assert world.cycle(HOUR - 1).evictions == ()
    result = world.cycle(HOUR)
    assert evicted(result) == {"j": EvictionReason.DRAINED}
    assert "is cordoned" in result.evictions[0].message


def test_cordoned_node_offers_nothing():
    world = World(racks(1), [queue("a", 16)]).submit(job("j", "a", pods=2))
    world.cordon("b0-r0-n0")
    assert pending(world.cycle(0)) == {"j": "NoFit"}


def test_pods_ready_timeout_and_backoff():
    world = World(racks(1), [queue("a", 16)]).submit(job("j", "a"))
    world.cycle(0)
    world.workloads["j"] = replace(world.workloads["j"], pods_ready=False)
    assert world.cycle(599).evictions == ()
    assert evicted(world.cycle(600)) == {"j": EvictionReason.PODS_READY_TIMEOUT}
    world.workloads["j"] = replace(world.workloads["j"], eligible_at=900)
    result = world.cycle(700)
    assert pending(result) == {"j": "Backoff"} and result.pending[0].retry_at == 900
    assert admitted(world.cycle(900)) == ["j"]


def test_limit_is_a_hard_cap_even_on_idle_capacity():
    world = World(racks(2), [queue("a", 8, limit=16)])
    world.submit(*(job(f"j{i}", "a", at=i) for i in range(3)))
    result = world.cycle(0)
    assert admitted(result) == ["j0", "j1"]
    assert pending(result) == {"j2": "LimitExceeded"}
    assert result.pending[0].message == (
        "queue a holds 16 nvidia.com/gpu; 8 more would exceed its limit of 16")


def test_fair_share_does_not_gate_admission():
    """Rank, don't cap: b's rack-bound gang keeps b's fair share at 16, yet a's third job
    takes the capacity nobody else can use now."""
    world = World(racks(2), [queue("a", 0, order=0), queue("b", 0, order=1)])
    world.submit(*(job(f"a{i}", "a", at=i) for i in range(3)))
    world.submit(job("b0", "b", at=0), job("b-big", "b", pods=2, required=RACK, at=1))
    result = world.cycle(0)
    assert result.fair_share.share("a", GPU) == 16
    assert sorted(admitted(result)) == ["a0", "a1", "a2", "b0"]
    assert pending(result) == {"b-big": "NoFit"}


def test_workload_on_a_parent_queue_waits_with_a_reason():
    world = World(racks(1), [queue("org"), queue("a", 8, parent="org")])
    result = world.submit(job("j", "org")).cycle(0)
    assert pending(result) == {"j": "InvalidQueue"}


def test_large_gang_is_not_starved_by_a_stream_of_small_jobs():
    settings = CycleSettings(fair_share=FairShareSettings(window=0), starvation_bound=HOUR)
    world = World(racks(1, nodes_per_rack=2), [queue("a", 16)], settings=settings)
    # small but long: protected beyond 15 min, so not the short jobs served before a drain
    world.submit(job("small0", "a", gpus=4, at=0, min_runtime=1200))
    world.submit(job("small1", "a", gpus=4, at=0, min_runtime=1200))
    world.submit(job("big", "a", pods=2, at=1))
    world.cycle(0)
    assert world.running() == ["small0", "small1"]
    # Small jobs finish one at a time and new ones keep arriving; the big gang needs both nodes.
    for step in range(1, 6):
        now = step * 1200.0
        finished = world.running()[0]
        world.finish(finished)
        world.submit(job(f"small{step + 1}", "a", gpus=4, at=now, min_runtime=1200))
        world.cycle(now)
        if "big" in world.running():
            break
    assert "big" in world.running(), [p for r in world.history for p in r.pending]
    reserved = [p for r in world.history for p in r.pending if p.reason == "Reserved"]
    assert reserved and "reserved for big" in reserved[0].message


def test_no_one_else_evicts_work_on_nodes_reserved_for_a_starving_gang():
    """The gang waits on a protected job; n0's unfunded job is what it will displace once
    n1 frees up, so no other preemptor may take n0 meanwhile."""
    settings = CycleSettings(fair_share=FairShareSettings(window=0), starvation_bound=HOUR)
    world = World(racks(1), [queue("a", 16, order=0), queue("b", 0, order=1)],
                  settings=settings)
    world.submit(_running(job("free", "b", 8, min_runtime=0), "b0-r0-n0", 0),
                 _running(job("protected", "b", 8, min_runtime=4 * HOUR), "b0-r0-n1", 0),
                 job("gang", "a", 8, pods=2, at=0), job("other", "b", 8, at=2 * HOUR))
    result = world.cycle(2 * HOUR)
    assert result.evictions == () and admitted(result) == []
    assert pending(result)["gang"] == "Reserved"
    assert pending(result)["other"] == "NoFit"


@pytest.mark.parametrize(("bound", "expected"), [(10 * HOUR, 2 * HOUR), (HOUR, 600 + HOUR)])
def test_next_change_is_when_time_alone_could_change_a_decision(bound, expected):
    """`high` may preempt both `low` jobs once their min runtime ends (at 2 h), and reaches
    the starvation bound at 600 s + bound: whichever comes first."""
    settings = CycleSettings(fair_share=FairShareSettings(window=0), starvation_bound=bound)
    world = World(racks(1), [queue("a", 16)], settings=settings)
    world.submit(_running(job("low0", "a", 8, min_runtime=2 * HOUR), "b0-r0-n0", 0),
                 _running(job("low1", "a", 8, min_runtime=3 * HOUR), "b0-r0-n1", 0),
                 job("high", "a", 8, priority=5, at=600))
    result = world.cycle(1200)
    assert pending(result) == {"high": "ProtectedVictims"}
    assert result.next_change == expected


def test_next_change_is_when_a_drained_node_can_be_emptied():
    world = World(racks(1), [queue("a", 16)])
    world.submit(_running(job("run", "a", 8, min_runtime=HOUR), "b0-r0-n0", 0))
    world.cordon("b0-r0-n0")
    result = world.cycle(600)
    assert result.evictions == () and result.next_change == HOUR
    assert world.cycle(HOUR).evictions[0].reason is EvictionReason.DRAINED


def test_unfunded_work_fills_reserved_nodes_until_the_gang_can_start():
    settings = CycleSettings(fair_share=FairShareSettings(window=0), starvation_bound=HOUR)
    world = World(racks(1, nodes_per_rack=2), [queue("a", 16, order=0), queue("c", 0, order=1)],
                  settings=settings)
    world.submit(job("small", "a", min_runtime=2 * HOUR), job("big", "a", pods=2, at=1))
    world.cycle(0)
    assert world.running() == ["small"]
    world.submit(job("free", "c", min_runtime=0, at=HOUR))
    result = world.cycle(HOUR + 1)
    assert pending(result) == {"big": "Reserved"}
    assert admitted(result) == ["free"]
    assert world.placement("free") == {"b0-r0-n1": 1}
    world.finish("small")
    result = world.cycle(2 * HOUR + 1)
    assert admitted(result) == ["big"]
    assert evicted(result) == {"free": EvictionReason.RECLAIMED}


def test_time_based_fair_share_favours_the_team_that_used_less():
    settings = CycleSettings(fair_share=FairShareSettings(window=7 * 86400, k_value=1.0))
    world = World(racks(2), [queue("a", 0, order=0), queue("b", 0, order=1)], settings=settings)
    world.usage = {"a": 16 * 7 * 86400.0}
    world.submit(*(job(f"a{i}", "a", gpus=1, at=0) for i in range(32)))
    world.submit(*(job(f"b{i}", "b", gpus=1, at=0) for i in range(32)))
    result = world.cycle(0)
    assert result.fair_share.share("b", GPU) > result.fair_share.share("a", GPU)
    held = {q: s.allocated.get(GPU, 0) for q, s in result.queues.items()}
    assert held["b"] > held["a"] and held["a"] + held["b"] == 32


def test_with_use_counted_as_held_a_funded_admission_asks_for_a_re_run() -> None:
    """Without a window, use is what is held: admitting funded work moves its allocation's
    rank, which may make its running work a victim for a preemptor turned away earlier in the
    cycle, so the cycle must not call itself settled; a cycle that admits nothing is."""
    world = World(racks(1), [queue("q0"), queue("q1")])
    world.submit(job("running", "q1", gpus=4, min_runtime=60.0))
    first = world.cycle(0.0)
    assert admitted(first) == ["running"] and not first.settled
    world.submit(job("too-big", "q0", gpus=8, pods=3, at=10.0))
    quiet = world.cycle(10.0)
    assert admitted(quiet) == [] and quiet.settled
