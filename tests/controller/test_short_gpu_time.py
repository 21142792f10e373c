"""Short jobs' GPU time, which sizes their room, is counted by the settings' own rule for a
short job, in the controller (`QueueUsage`) and in the simulator alike: a 20-minute 2-GPU job
counts only where `shortJobs.maxMinRuntime` allows 20 minutes."""

from collections.abc import Mapping

import pytest

from admitter.api.convert import core_cycle_settings
from admitter.api.scenario import Scenario
from admitter.api.settings import Settings
from admitter.controller.status import QueueUsage
from admitter.core.decisions import CycleResult
from admitter.core.incremental import IncrementalCore
from admitter.core.model import GPU, PodSet, Workload
from admitter.sim.engine import Simulation

HOUR = 3600.0
TWENTY_MINUTES = {"shortJobs": {"maxMinRuntime": "20m"}}


@pytest.mark.parametrize("settings, held", [({}, 0.0), (TWENTY_MINUTES, 2.0)])
def test_the_controller_counts_short_gpu_time_by_the_settings(settings, held):
    usage = QueueUsage(core_cycle_settings(Settings.model_validate(settings)))
    job = Workload("ns/debug", "a", (PodSet("main", 1, {GPU: 2}),), 0.0, min_runtime=1200.0)
    queues = {"a": {"metadata": {"name": "a", "uid": "uid"}, "status": {}}}
    usage.observe(queues, [], 0.0)
    usage.decided([], [job], 0.0)
    usage.observe(queues, [job.admitted(0.0, ({"n0": 1},))], HOUR)
    assert usage.ledger.short_gpus(HOUR) == held


@pytest.mark.parametrize("settings, held", [({}, 0.0), (TWENTY_MINUTES, 2.0)])
def test_the_simulator_counts_short_gpu_time_by_the_settings(settings, held):
    scenario = Scenario.model_validate({
        "horizon": 2 * HOUR,
        "settings": {"cycle": "10m", **settings},
        "cluster": {"nodeGroups": [{"count": 1, "namePrefix": "n",
                                    "capacity": {"nvidia.com/gpu": 8}}]},
        "queues": [{"name": "a"}],
        "workloads": [{"name": "debug", "queue": "a", "podRequests": {"nvidia.com/gpu": 2},
                       "duration": "2h", "minRuntime": "20m"},
                      {"name": "later", "queue": "a", "podRequests": {"nvidia.com/gpu": 1},
                       "duration": "10m", "submit": "1h"}],
    })
    seen: list[tuple[float, float]] = []

    def decide(core: IncrementalCore, now: float, usage: Mapping[str, float],
               short_gpus: float) -> CycleResult:
        seen.append((now, short_gpus))
        return core.cycle(now, usage, short_gpus)

    Simulation(scenario, decide=decide).run()
    assert [gpus for at, gpus in seen if at == HOUR] == pytest.approx([held])
