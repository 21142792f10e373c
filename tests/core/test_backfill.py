"""Backfill on a drain's held capacity, computed by hand: long funded work may start on nodes
held for a starving gang only if it cannot delay the gang (resumable, taken by the drain, its min
runtime over by the time the gang could start anyway), and only if the drain's choice stays."""

import pytest

from admitter.core.decisions import CycleSettings, EvictionReason
from admitter.core.model import FairShareSettings, Workload

from builders.core import RACK, job, queue, racks, running_on
from builders.world import World, admitted, evicted, pending

HOUR = 3600.0
WEEK = FairShareSettings(window=7 * 86400, k_value=1.0)


def _held_node(candidate: Workload, r1_free_gpus: int = 0) -> World:
    """Racks r0 and r1 of two 8-GPU nodes (32 GPUs: no short jobs' headroom). a's 2-node gang
    needs a rack and has starved since t=0; b has used 3 % more of its budget than a (worse, so
    a drain for a takes b's resumable work). r0: n0 idle, n1 held by b-soon (resumable,
    protected until 2 h). r1 holds b's non-resumable work (the drain never takes it, so r1 could
    never be emptied), unless `r1_free_gpus` of r1-n0 are idle and the rest is resumable. The
    drain holds r0-n0, and the gang can start at 2 h. `candidate` waits."""
    world = World(racks(2), [queue("a"), queue("b", order=1)],
                  settings=CycleSettings(fair_share=WEEK))
    world.usage = {"a": 10.0 * HOUR, "b": 10.3 * HOUR}
    drainable_r1 = r1_free_gpus > 0
    world.submit(running_on("b-soon", "b", "b0-r0-n1", min_runtime=2 * HOUR),
                 running_on("b-r1a", "b", "b0-r1-n0", gpus=8 - r1_free_gpus,
                            resumable=drainable_r1, min_runtime=5 * HOUR),
                 running_on("b-r1b", "b", "b0-r1-n1", resumable=drainable_r1,
                            min_runtime=5 * HOUR),
                 job("gang", "a", pods=2, required=RACK, at=0.0), candidate)
    return world


def test_resumable_work_protected_until_the_gang_could_start_is_backfilled():
    """At 1 h, b-fits (resumable, protected 1 h) would be protected until 2 h, when b-soon's
    protection ends and the gang could start anyway: it runs on the held node meanwhile, and at
    2 h the drain takes both, so the gang starts no later than without it."""
    world = _held_node(job("b-fits", "b", at=10.0, min_runtime=HOUR))
    first = world.cycle(HOUR)
    assert admitted(first) == ["b-fits"] and first.evictions == ()
    assert world.placement("b-fits") == {"b0-r0-n0": 1}
    assert "backfilled on nodes held for gang" in first.admissions[0].message
    assert pending(first) == {"gang": "Reserved"}
    assert "reserved for gang: b0-r0-n0, b0-r0-n1" in first.pending[0].message
    still = world.cycle(1.5 * HOUR)  # the drain keeps its nodes with b-fits running
    assert still.evictions == () and still.admissions == ()
    assert "reserved for gang: b0-r0-n0, b0-r0-n1" in still.pending[0].message
    done = world.cycle(2 * HOUR)
    assert evicted(done) == {"b-fits": EvictionReason.RECLAIMED,
                             "b-soon": EvictionReason.RECLAIMED}
    assert admitted(done) == ["gang"]
    assert set(world.placement("gang")) == {"b0-r0-n0", "b0-r0-n1"}


@pytest.mark.parametrize("candidate", [
    job("b-late", "b", at=10.0, min_runtime=2 * HOUR),  # protected until 3 h, past 2 h
    job("b-lost", "b", at=10.0, min_runtime=HOUR, resumable=False),  # its progress would be lost
    job("a-same", "a", at=10.0, min_runtime=HOUR),  # the gang's equal: the drain never takes it
], ids=["protected-past-the-start", "non-resumable", "not-taken-by-the-drain"])
def test_work_that_could_delay_the_gang_is_not_backfilled(candidate: Workload):
    """The held node stays idle, and the gang still starts at 2 h."""
    world = _held_node(candidate)
    first = world.cycle(HOUR)
    assert first.admissions == () and first.evictions == ()
    assert pending(first) == {"gang": "Reserved", candidate.key: "NoFit"}
    done = world.cycle(2 * HOUR)
    assert evicted(done) == {"b-soon": EvictionReason.RECLAIMED}
    assert admitted(done) == ["gang"]


def test_backfill_that_would_move_the_drain_is_refused():
    """r1-n0 has 4 idle GPUs and r1's work is resumable, so r1 could be emptied too: r0 wins
    with 8 free GPUs against 4. With b-fits on r0-n0, r0 would have none free and r1 would be
    chosen next cycle (the held capacity released, the drain started over): not backfilled."""
    world = _held_node(job("b-fits", "b", at=10.0, min_runtime=HOUR), r1_free_gpus=4)
    first = world.cycle(HOUR)
    assert first.admissions == ()
    assert pending(first) == {"gang": "Reserved", "b-fits": "NoFit"}
    reason = {p.key: p for p in first.pending}["gang"]
    assert "reserved for gang: b0-r0-n0, b0-r0-n1" in reason.message
