"""Each policy setting (`CycleSettings.short_jobs`, `CycleSettings.time_slicing`) changes a
decision: the same world decided with the default and with another value, computed by hand.
Worlds of 64 GPUs (4 racks of two 8-GPU nodes) keep 1 GPU for short jobs at the default
fraction."""

from dataclasses import replace

from admitter.core.decisions import CycleSettings, EvictionReason
from admitter.core.model import FairShareSettings
from admitter.core.policy import ShortJobs, TimeSlicing

from builders.core import job, queue, racks, running_on
from builders.world import World, admitted, evicted

HOUR = 3600.0
WEEK = FairShareSettings(window=7 * 86400, k_value=1.0)
NODES = [f"b0-r{r}-n{n}" for r in range(4) for n in range(2)]


def _rack3_free(settings: CycleSettings, short_gpus: float = 4.0,
                **gpus_on_rack3: int) -> World:
    """a's protected jobs (10 h) fill racks r0-r2 and hold `gpus_on_rack3` GPUs on each node
    of rack r3 (by node name); b, with nothing running, has work to submit; short jobs held
    `short_gpus` on average (4: the room is 4 GPUs, on one node)."""
    world = World(racks(4), [queue("a"), queue("b", order=1)], settings=settings)
    world.short_gpus = short_gpus
    world.submit(*(running_on(f"a{i}", "a", node, min_runtime=10 * HOUR)
                   for i, node in enumerate(NODES[:6])),
                 *(running_on(f"a-{node}", "a", node, gpus=gpus, min_runtime=10 * HOUR)
                   for node, gpus in gpus_on_rack3.items()))
    return world


def _short_jobs(**changes: float) -> CycleSettings:
    return CycleSettings(short_jobs=replace(ShortJobs(), **changes))


def test_max_min_runtime_decides_whether_a_twenty_minute_job_is_short():
    """2 + 2 idle GPUs: no node would keep room for a 4-GPU debug job after a 2-GPU start. A
    2-GPU job protected for 20 minutes is long by default (15 minutes) and waits; allowed
    30 minutes, it is short and starts."""
    def decided(settings: CycleSettings) -> list[str]:
        world = _rack3_free(settings, **{"b0-r3-n0": 6, "b0-r3-n1": 6})
        world.submit(job("b-20m", "b", gpus=2, min_runtime=20 * 60.0, at=1.0))
        return admitted(world.cycle(10.0))

    assert decided(CycleSettings()) == []
    assert decided(_short_jobs(max_min_runtime=30 * 60.0)) == ["b-20m"]


def test_max_gpus_decides_whether_a_six_gpu_debug_job_is_short():
    """The only 6 idle GPUs are on one node: a long 6-GPU start would leave none of the 4 GPUs
    kept for short jobs, and use only 2 beyond them. A 10-minute 6-GPU job is long by default
    (4 GPUs) and waits; allowed 8 GPUs, it is short and starts."""
    def decided(settings: CycleSettings) -> tuple[list[str], str]:
        world = _rack3_free(settings, **{"b0-r3-n0": 2, "b0-r3-n1": 8})
        world.submit(job("b-debug", "b", gpus=6, min_runtime=600.0, at=1.0))
        result = world.cycle(10.0)
        return admitted(result), " ".join(p.message for p in result.pending)

    started, why = decided(CycleSettings())
    assert started == [] and "6 more would leave 0, fewer than the 4 kept for short jobs" in why
    assert decided(_short_jobs(max_gpus=8)) == (["b-debug"], "")


def test_least_room_fraction_sizes_the_room_long_starts_leave():
    """12 idle GPUs on rack r3: 4 beside a's job on n0, all 8 of n1; no short job ran. By
    default 1 GPU (2 % of 64, rounded down) is kept, and an 8-GPU and a 4-GPU long start both
    go ahead. At 20 %, 12 are kept, which no short-job demand backs: the 8-GPU start on the
    idle n1 still goes ahead (that floor never keeps a whole node idle), and the 4-GPU one,
    which would take the 4 beside a's job and nothing beyond the room, waits."""
    def decided(settings: CycleSettings) -> tuple[list[str], str]:
        world = _rack3_free(settings, 0.0, **{"b0-r3-n0": 4, "b0-r3-n1": 0})
        world.submit(job("b-8", "b", gpus=8, at=1.0), job("b-4", "b", gpus=4, at=2.0))
        result = world.cycle(10.0)
        return admitted(result), " ".join(p.message for p in result.pending)

    assert decided(CycleSettings())[0] == ["b-8", "b-4"]
    started, why = decided(_short_jobs(least_room_fraction=0.2))
    assert started == ["b-8"]
    assert ("4 more would leave 0, fewer than the 12 kept for short jobs (20% of the "
            "schedulable nvidia.com/gpu); it would take only the room's GPUs") in why


def _time_slicing(b_used: float, *, resumable: bool = True, **changes: float) -> dict[str, str]:
    """Evictions when a (1 GPU-hour used) waits for the one node, where b (`b_used`
    GPU-hours, equal budget) runs a job past its min runtime; a0 is not starving (no drain)."""
    settings = CycleSettings(fair_share=WEEK, starvation_bound=10 * HOUR,
                             time_slicing=replace(TimeSlicing(), **changes))
    world = World(racks(1, nodes_per_rack=1), [queue("a"), queue("b", order=1)],
                  settings=settings)
    world.usage = {"a": 1.0 * HOUR, "b": b_used * HOUR}
    world.submit(running_on("b0", "b", "b0-r0-n0", resumable=resumable),
                 job("a0", "a", at=9.0))
    return evicted(world.cycle(2 * HOUR))


def test_a_smaller_swap_margin_swaps_where_the_default_does_not():
    """b has used 4 % more of its budget than a: within the default 5 % margin, beyond 2 %."""
    assert _time_slicing(1.04) == {}
    assert _time_slicing(1.04, swap_margin=0.02) == {"b0": EvictionReason.RECLAIMED}


def test_a_smaller_non_resumable_gap_takes_non_resumable_work_sooner():
    """b's job is non-resumable. a's side is charged its job's protected run (1 + 8 GPU-hours
    = 9): 50 GPU-hours is not ten times that (default gap 9), but is beyond five times (4)."""
    assert _time_slicing(50.0, resumable=False) == {}
    assert _time_slicing(50.0, resumable=False, non_resumable_gap=4.0) == {
        "b0": EvictionReason.RECLAIMED}
