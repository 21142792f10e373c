"""Each reason a waiting workload is given, against a world built so that its true cause is
known: the reason, its message, the workloads it names and the time it promises."""

import pytest

from admitter.core.decisions import CycleSettings, PendingReason
from admitter.core.model import FairShareSettings

from builders.core import RACK, gang, job, node, queue, racks, running_on, workload
from builders.world import World, admitted, pending

HOUR = 3600.0
NOW = 600.0
KEEPER = 100
"""A priority at the non-preemptible threshold: such work is never anyone's victim."""


def _racks_kept_by(keepers: list[str], protected: dict[str, float]) -> World:
    """Two racks (r0, r1) of two 8-GPU nodes (n0, n1). Team a, with no quota, runs 8-GPU jobs
    inside their min runtime on the nodes `protected` names (ending at the time given), named
    a-RACK-NODE; team b's 4-GPU non-preemptible jobs run on the nodes `keepers` names. Team c,
    holding nothing, submits a gang of 2 × 8 GPUs that must stay in one rack, so only a rack
    with both nodes emptied holds it."""
    world = World(racks(2), [queue("a", 0), queue("b", 8), queue("c", 16)])
    for at, ends in protected.items():
        world.submit(running_on(f"a-{at[3:]}", "a", at, min_runtime=ends))
    for i, at in enumerate(keepers):
        world.submit(running_on(f"b-{i}", "b", at, gpus=4, priority=KEEPER))
    return world.submit(job("gang", "c", pods=2, at=NOW, required=RACK))


def test_protected_victims_names_only_the_work_whose_eviction_makes_room():
    """Rack r0 frees up once a-r0-n0 may leave at 2 h; a-r1-n0 ends sooner, but r1 keeps b's
    non-preemptible job, so evicting a-r1-n0 would not make room and is not promised."""
    world = _racks_kept_by(["b0-r1-n1"], {"b0-r1-n0": HOUR, "b0-r0-n0": 2 * HOUR})
    result = world.cycle(NOW)
    assert admitted(result) == []
    waiting = result.pending[0]
    assert (waiting.key, waiting.reason) == ("gang", PendingReason.PROTECTED_VICTIMS)
    assert waiting.blockers == ("a-r0-n0",)
    assert waiting.retry_at == 2 * HOUR
    assert "evicting a-r0-n0 would make room" in waiting.message
    assert "a-r1-n0" not in waiting.message
    assert admitted(world.cycle(HOUR)) == []  # a-r1-n0 may leave now: it would not help
    late = world.cycle(2 * HOUR)
    assert admitted(late) == ["gang"] and [e.key for e in late.evictions] == ["a-r0-n0"]


def test_protected_victims_waits_for_the_last_protection_the_room_needs():
    """Rack r0 holds two of c's own lower-priority jobs, one protected until 1 h and one until
    2 h; r1 keeps b's non-preemptible job. The gang needs both gone: it starts at 2 h."""
    world = _racks_kept_by(["b0-r1-n1"], {})
    world.submit(running_on("c-low0", "c", "b0-r0-n0", min_runtime=HOUR),
                 running_on("c-low1", "c", "b0-r0-n1", min_runtime=2 * HOUR),
                 job("gang", "c", pods=2, at=NOW, priority=5, required=RACK))
    waiting = world.cycle(NOW).pending[0]
    assert waiting.reason == PendingReason.PROTECTED_VICTIMS
    assert sorted(waiting.blockers) == ["c-low0", "c-low1"]
    assert waiting.retry_at == 2 * HOUR
    assert admitted(world.cycle(HOUR)) == []
    assert admitted(world.cycle(2 * HOUR)) == ["gang"]


@pytest.mark.parametrize("keeper", [
    {"priority": KEEPER},  # non-preemptible
    {"min_runtime": 60.0},  # past its min runtime, but b is not ranked clearly worse than c
], ids=["non-preemptible", "better-ranked"])
def test_no_fit_when_no_protection_ending_would_make_room(keeper: dict[str, float]):
    """Every rack keeps one of b's 4-GPU jobs, which c may not take: evicting a's protected job
    would still leave 12 GPUs in a rack, fewer than 16, so no one is named and no time
    promised."""
    world = _racks_kept_by([], {"b0-r0-n0": HOUR})
    world.submit(*(running_on(f"b-{at}", "b", at, gpus=4, **keeper)  # type: ignore[arg-type]
                   for at in ("b0-r0-n1", "b0-r1-n1")))
    waiting = world.cycle(NOW).pending[0]
    assert waiting.reason == PendingReason.NO_FIT
    assert waiting.blockers == () and waiting.retry_at is None
    assert "a-r0-n0" not in waiting.message and "protect" not in waiting.message
    assert admitted(world.cycle(HOUR)) == []  # its protection ended: still no room


def test_never_fits_a_pod_larger_than_any_node():
    """16 GPUs in one pod on 8-GPU nodes, beside protected work it could otherwise wait for."""
    world = _racks_kept_by([], {"b0-r0-n0": HOUR, "b0-r1-n0": HOUR})
    world.submit(workload("huge", gang(1, 16), queue="c", at=NOW, min_runtime=HOUR))
    result = world.cycle(NOW)
    waiting = {p.key: p for p in result.pending}["huge"]
    assert waiting.reason == PendingReason.NEVER_FITS
    assert waiting.blockers == () and waiting.retry_at is None
    assert "16" in waiting.message and "even with nothing else running" in waiting.message
    assert {p.key: p for p in world.cycle(2 * HOUR).pending}["huge"].reason == (
        PendingReason.NEVER_FITS)


def test_never_fits_a_gang_larger_than_any_domain_of_its_required_level():
    world = World(racks(2), [queue("c", 32)]).submit(job("wide", "c", pods=3, required=RACK))
    waiting = world.cycle(0).pending[0]
    assert waiting.reason == PendingReason.NEVER_FITS
    assert "rack" in waiting.message


def test_never_fits_outweighs_a_limit_and_counts_nodes_cordoned_or_busy_as_there():
    """A 2-pod gang of 8 fits the two nodes once the cordon lifts and the other pods end, so
    it is not `never`; a 16-GPU pod never fits, whatever its queue's limit says."""
    nodes = [node("n0", used=8), node("n1", unschedulable=True)]
    world = World(nodes, [queue("c", 32, limit=8)], topology=())
    world.submit(job("pair", "c", pods=2), job("huge", "c", gpus=16))
    reasons = pending(world.cycle(0))
    assert reasons == {"pair": PendingReason.LIMIT_EXCEEDED, "huge": PendingReason.NEVER_FITS}


def test_unfunded_work_that_never_fits_says_so():
    world = World(racks(1), [queue("c", 0)])
    world.submit(workload("huge", gang(1, 16), queue="c"))
    assert pending(world.cycle(0)) == {"huge": PendingReason.NEVER_FITS}


def test_limit_exceeded_names_the_queue_whose_limit_holds_it():
    """The parent's limit binds, not the leaf's: the message names the parent."""
    world = World(racks(2), [queue("org", 16, limit=16), queue("c", 16, parent="org"),
                             queue("d", 16, parent="org")])
    world.submit(running_on("d-0", "d", "b0-r0-n0", min_runtime=HOUR),
                 running_on("c-0", "c", "b0-r0-n1", min_runtime=HOUR),
                 job("next", "c", at=NOW))
    waiting = world.cycle(NOW).pending[0]
    assert waiting.reason == PendingReason.LIMIT_EXCEEDED
    assert waiting.message.startswith("queue org holds 16 nvidia.com/gpu; 8 more would "
                                      "exceed its limit of 16")


def test_quota_exceeded_names_the_queue_whose_fair_share_holds_it():
    """Non-preemptible work stays within its queue's fair share: c's share is 8 of 16, with
    d asking for the rest."""
    settings = CycleSettings(fair_share=FairShareSettings(window=0))
    world = World(racks(1), [queue("c", 8), queue("d", 8)], settings=settings)
    world.submit(running_on("c-0", "c", "b0-r0-n0", min_runtime=HOUR, priority=KEEPER),
                 job("more", "c", at=NOW, priority=KEEPER), job("d-0", "d", at=NOW + 1))
    result = world.cycle(NOW)
    assert admitted(result) == ["d-0"]
    waiting = {p.key: p for p in result.pending}["more"]
    assert waiting.reason == PendingReason.QUOTA_EXCEEDED
    assert waiting.message.startswith("queue c holds 8 nvidia.com/gpu; 8 more would exceed "
                                      "its fair share of 8")
