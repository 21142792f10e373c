"""The controller and the simulator feed one usage ledger and get the same windowed usage.

The same random admissions, preemptions and finishes go through both paths: the simulator's
(`Simulation`, its decisions scripted here instead of made by the core) and the controller's
(`QueueUsage`: ClusterQueue status restored by new leaders, runs opened and closed from the
Workloads each pass sees and from the cycle's decisions). The usage each cycle is given must
be the same, exactly: the hourly form is the ledger's own, so persisting it loses nothing.
Times are whole seconds, as the API records them.

The one thing a new leader cannot know is a run that stopped after the last status write;
`test_a_run_stopped_after_the_last_write_is_lost_to_a_new_leader` pins that bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from admitter.api.scenario import Scenario
from admitter.controller.status import QueueUsage
from admitter.core.decisions import (
    Admission,
    CycleResult,
    CycleSettings,
    Eviction,
    EvictionReason,
)
from admitter.core.fairshare import compute_fair_share
from admitter.core.incremental import IncrementalCore
from admitter.core.model import GPU, FairShareSettings, Phase, PodSet, Workload
from admitter.kube.objects import format_time
from admitter.sim.engine import Simulation

QUEUES = ("a", "b", "c")
CYCLE = 600.0
HOUR = 3600.0


@dataclass
class Cycle:
    """What the simulator handed one cycle, and what the script decided there."""

    at: float
    usage: dict[str, float]
    running: list[Workload]
    evicted: list[str]
    admitted: list[Workload]


@dataclass
class Script:
    """Decisions drawn in advance: per cycle, (workload index, admit or evict) moves."""

    moves: list[list[tuple[int, bool]]]
    cycles: list[Cycle] = field(default_factory=list)

    def decide(self, core: IncrementalCore, now: float, usage: Mapping[str, float],
               short_gpus: float) -> CycleResult:
        snapshot = core.snapshot(now, usage, short_gpus)
        running = [w for w in snapshot.workloads if w.phase is Phase.ADMITTED]
        waiting = {w.key: w for w in snapshot.workloads if w.phase is not Phase.ADMITTED}
        held = {w.key for w in running}
        moves = self.moves[len(self.cycles)] if len(self.cycles) < len(self.moves) else []
        admitted: dict[str, Workload] = {}
        evicted: list[str] = []
        for index, admit in moves:
            key = f"w{index}"
            if admit and key in waiting and key not in admitted:
                admitted[key] = waiting[key]
            elif not admit and key in held and key not in evicted:
                evicted.append(key)
        node = snapshot.nodes[0].name
        by_key = {w.key: w for w in snapshot.workloads}
        self.cycles.append(Cycle(snapshot.now, dict(snapshot.usage), running, evicted,
                                 list(admitted.values())))
        return CycleResult(
            tuple(Admission(key, by_key[key].queue, ({node: 1},), {}, "") for key in admitted),
            tuple(Eviction(key, by_key[key].queue, EvictionReason.PREEMPTED, "")
                  for key in evicted),
            (), compute_fair_share(core.tree, {}, {}, {}, 0.0), snapshot.now + CYCLE, False,
            dict)


def scenario(workloads: list[tuple[str, int, int, bool]], cycles: int, window: float,
             half_life: float) -> Scenario:
    return Scenario.model_validate({
        "horizon": cycles * CYCLE,
        "settings": {"cycle": CYCLE, "fairShare": {"window": window, "halfLife": half_life}},
        "cluster": {"nodeGroups": [{"count": 1, "namePrefix": "n",
                                    "capacity": {"nvidia.com/gpu": 1000}}]},
        "queues": [{"name": name} for name in QUEUES],
        "workloads": [{"name": f"w{i}", "queue": queue, "podRequests": {"nvidia.com/gpu": gpus},
                       "duration": duration, "minRuntime": 600 if funded else 0}
                      for i, (queue, gpus, duration, funded) in enumerate(workloads)],
    })


def cluster_queues(status: dict[str, dict[str, object]], uid: str) -> dict[str, dict]:
    return {name: {"metadata": {"name": name, "uid": uid}, "status": status.get(name, {})}
            for name in QUEUES}


WORKLOADS = st.lists(st.tuples(st.sampled_from(QUEUES), st.integers(1, 8),
                               st.integers(1, 20_000), st.booleans()), min_size=1, max_size=10)
MOVES = st.lists(st.lists(st.tuples(st.integers(0, 9), st.booleans()), max_size=4),
                 min_size=1, max_size=40)


@settings(max_examples=80, deadline=None)
@given(WORKLOADS, MOVES, st.sampled_from([HOUR, 2 * HOUR + 1800, 5 * HOUR]),
       st.sampled_from([0.0, 1800.0]), st.sets(st.integers(0, 40)))
def test_controller_and_simulator_see_the_same_windowed_usage(
        workloads: list[tuple[str, int, int, bool]], moves: list[list[tuple[int, bool]]],
        window: float, half_life: float, restarts: set[int]) -> None:
    script = Script(moves)
    run = Simulation(scenario(workloads, len(moves), window, half_life), decide=script.decide)
    outcome = run.run()
    finishes = [(job.finished_at, job.key) for job in outcome.jobs
                if job.finished_at is not None]
    passes = sorted([(at, 0, key) for at, key in finishes]
                    + [(cycle.at, 1, str(i)) for i, cycle in enumerate(script.cycles)])

    fair_share = FairShareSettings(window=window, half_life=half_life)
    usage = QueueUsage(CycleSettings(fair_share=fair_share))
    persisted: dict[str, dict[str, object]] = {}
    running: dict[str, Workload] = {}
    for at, is_cycle, name in passes:
        queues = cluster_queues(persisted, "uid")
        if not is_cycle:  # the pass that sees the Job done marks its Workload Finished
            running.pop(name)
            usage.observe(queues, running.values(), at)
            continue
        index = int(name)
        cycle = script.cycles[index]
        assert sorted(running) == sorted(w.key for w in cycle.running)
        assert usage.observe(queues, cycle.running, at) == cycle.usage, (index, at)
        usage.decided(cycle.evicted, cycle.admitted, at)
        for key in cycle.evicted:
            del running[key]
        running.update((w.key, w.admitted(at, ({"n0": 1},))) for w in cycle.admitted)
        if index in restarts:  # the status written, then another leader's first pass
            persisted = {queue: usage.status(queue) for queue in QUEUES}
            usage = QueueUsage(CycleSettings(fair_share=fair_share))
            usage.observe(cluster_queues(persisted, "uid"), running.values(), at)


def test_a_run_stopped_after_the_last_write_is_lost_to_a_new_leader() -> None:
    """The bound of the persisted form: a new leader restores the hours up to the last status
    write and charges the runs it finds from there; a run that stopped in between is missing
    exactly what it used since that write, no more."""
    fair_share = FairShareSettings(window=7 * 24 * HOUR)
    queues = cluster_queues({}, "uid")
    pending = Workload("ns/w", "a", (PodSet("main", 1, {GPU: 4}),), 0.0, 0, 600.0)
    running = pending.admitted(0.0, ({"n0": 1},))
    keeper = QueueUsage(CycleSettings(fair_share=fair_share))
    keeper.observe(queues, [], 0.0)
    keeper.decided([], [pending], 0.0)
    keeper.observe(queues, [running], HOUR)
    written = {"a": keeper.status("a")}
    assert written["a"]["usageAccountedAt"] == format_time(HOUR)
    keeper.observe(queues, [], HOUR + 600)  # it finished ten minutes after the write
    assert keeper.observe(queues, [], 2 * HOUR) == {"a": 4 * (HOUR + 600)}
    successor = QueueUsage(CycleSettings(fair_share=fair_share))
    assert successor.observe(cluster_queues(written, "uid"), [], 2 * HOUR) == {"a": 4 * HOUR}


def test_unreadable_usage_in_a_status_is_skipped_not_fatal() -> None:
    """A bucket someone else wrote badly is left out; a charge time ahead of this leader's
    clock is taken as now, so the runs it finds are charged from now on."""
    status = {"usage": [{"start": format_time(0), "gpuSeconds": 7200.0},
                        {"start": "yesterday", "gpuSeconds": 1.0},
                        {"gpuSeconds": 5.0},
                        {"start": format_time(HOUR), "gpuSeconds": -3.0}],
              "usageAccountedAt": format_time(100 * HOUR)}
    keeper = QueueUsage(CycleSettings(fair_share=FairShareSettings(window=7 * 24 * HOUR)))
    pending = Workload("ns/w", "a", (PodSet("main", 1, {GPU: 2}),), 0.0, 0, 600.0)
    running = pending.admitted(2 * HOUR, ({"n0": 1},))
    assert keeper.observe(cluster_queues({"a": status}, "uid"), [running], 2 * HOUR) == {
        "a": 7200.0}
    assert keeper.observe(cluster_queues({"a": status}, "uid"), [running], 3 * HOUR) == {
        "a": 7200.0 + 2 * HOUR}
