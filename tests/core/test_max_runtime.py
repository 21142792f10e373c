"""A maximum run time: declared beside the min runtime, counted over every admission of a
workload, and the end of it: stopped, finished, never requeued."""

from dataclasses import replace

import pytest

from admitter.api.clusterqueue import ClusterQueueSpec
from admitter.api.contract import (
    MAX_RUNTIME_ANNOTATION,
    MIN_RUNTIME_ANNOTATION,
    ContractError,
    parse_contract,
)
from admitter.api.workload import WorkloadSpec
from admitter.core.decisions import EvictionReason

from builders.core import job, queue, racks
from builders.world import World, admitted, evicted

MINUTE = 60.0


def _contract(annotations, ceiling=None):
    return parse_contract(annotations, max_min_runtime=8 * 3600.0, topology_levels=None,
                          max_runtime_ceiling=ceiling)


def test_a_workload_is_stopped_for_good_once_it_has_run_its_maximum():
    world = World(racks(1), [queue("a", 16)]).submit(
        replace(job("debug", "a", min_runtime=5 * MINUTE), max_runtime=30 * MINUTE))
    assert admitted(world.cycle(0)) == ["debug"]
    before = world.cycle(29 * MINUTE)
    assert before.evictions == ()
    assert before.next_change == 30 * MINUTE  # the loop wakes exactly then
    result = world.cycle(30 * MINUTE)
    assert evicted(result) == {"debug": EvictionReason.MAX_RUNTIME_EXCEEDED}
    assert result.evictions[0].message == "ran 30m, its maximum run time"
    assert not EvictionReason.MAX_RUNTIME_EXCEEDED.requeues
    assert "debug" not in world.workloads  # finished: the world does as the controller does
    assert world.cycle(31 * MINUTE).admissions == ()


def test_the_maximum_counts_every_admission_added_up():
    """A resumable job requeued by time-slicing does not start its count again."""
    ran = replace(job("train", "a", min_runtime=MINUTE), max_runtime=60 * MINUTE,
                  ran_before=50 * MINUTE)
    world = World(racks(1), [queue("a", 16)]).submit(ran)
    world.cycle(0)
    assert world.cycle(9 * MINUTE).evictions == ()
    assert evicted(world.cycle(10 * MINUTE)) == {"train": EvictionReason.MAX_RUNTIME_EXCEEDED}


def test_work_without_a_maximum_runs_on():
    world = World(racks(1), [queue("a", 16)]).submit(job("long", "a"))
    world.cycle(0)
    assert world.cycle(1000 * 3600.0).evictions == ()


def test_a_maximum_below_the_minimum_is_refused_naming_both():
    with pytest.raises(ContractError) as refused:
        _contract({MIN_RUNTIME_ANNOTATION: "1h", MAX_RUNTIME_ANNOTATION: "30m"})
    assert str(refused.value) == (
        "annotation admitter.dev/max-runtime='30m' is below the min runtime 1h: the job would "
        "be stopped inside its protected min runtime; raise the maximum or lower the minimum")


@pytest.mark.parametrize(("annotations", "ceiling", "expected"), [
    ({MAX_RUNTIME_ANNOTATION: "0"}, None, "must be above 0"),
    ({MAX_RUNTIME_ANNOTATION: "soon"}, None, "annotation admitter.dev/max-runtime: "),
    ({MAX_RUNTIME_ANNOTATION: "3h"}, 2 * 3600.0, "is above the queue's maxRuntimeCeiling 2h"),
])
def test_a_bad_maximum_is_refused_with_the_field_and_the_fix(annotations, ceiling, expected):
    with pytest.raises(ContractError, match=expected):
        _contract(annotations, ceiling)


def test_a_maximum_within_the_ceiling_and_above_the_minimum_is_kept():
    contract = _contract({MIN_RUNTIME_ANNOTATION: "10m", MAX_RUNTIME_ANNOTATION: "30m"},
                         ceiling=3600.0)
    assert (contract.min_runtime, contract.max_runtime) == (600.0, 1800.0)
    assert _contract({}).max_runtime is None


def test_a_workload_spec_checks_its_maximum_against_its_minimum():
    with pytest.raises(ValueError, match="maxRuntime 10m is below the min runtime 1h"):
        WorkloadSpec.model_validate({"queueName": "q", "minRuntime": "1h", "maxRuntime": "10m",
                                     "podSets": [{"name": "main", "count": 1}]})


def test_a_queue_default_above_its_ceiling_is_refused():
    with pytest.raises(ValueError, match="defaultMaxRuntime 3h is above maxRuntimeCeiling 2h"):
        ClusterQueueSpec.model_validate({"defaultMaxRuntime": "3h", "maxRuntimeCeiling": "2h"})
