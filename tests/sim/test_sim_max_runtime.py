"""The simulator stops a workload at its maximum run time as the controller does: for good,
counted over every run, and not as a preemption."""

import pytest

from admitter.api.errors import InputError

from builders.scenario import simulate

TWO_TEAMS = """
cluster:
  nodeGroups: [{count: 1, namePrefix: n-, capacity: {nvidia.com/gpu: 8}}]
queues:
  - {name: root, resources: {nvidia.com/gpu: {quota: -1}}}
  - {name: a, parent: root, resources: {nvidia.com/gpu: {quota: 4}}}
  - {name: b, parent: root, resources: {nvidia.com/gpu: {quota: 4}}}
"""


def _by_name(result):
    return {w["name"]: w for w in result["workloads"]}


def test_a_forgotten_debug_session_is_stopped_at_its_maximum_and_frees_its_gpus():
    """Within its team's quota nothing may requeue it: only its maximum ends it."""
    result = _by_name(simulate(TWO_TEAMS + """
workloads:
  - {name: notebook, queue: a, podRequests: {nvidia.com/gpu: 4}, duration: 30d,
     minRuntime: 10m, maxRuntime: 30m}
  - {name: train, queue: b, submit: 1m, podRequests: {nvidia.com/gpu: 8}, duration: 1h,
     minRuntime: 1h}
"""))
    notebook = result["notebook"]
    assert notebook["stopped_at_max_runtime"] is True
    assert notebook["finished_s"] == 1800.0
    assert notebook["preemptions"] == 0 and notebook["stops"] == []
    assert result["train"]["starts"][0]["at_s"] == 1800.0


def test_the_maximum_counts_the_runs_before_a_preemption():
    """Over its team's quota, it is requeued once its min runtime is over by the other team's
    job, and runs again after that job: its maximum counts both runs."""
    result = _by_name(simulate(TWO_TEAMS + """
workloads:
  - {name: sweep, queue: a, podRequests: {nvidia.com/gpu: 8}, duration: 30d,
     minRuntime: 10m, maxRuntime: 30m}
  - {name: urgent, queue: b, submit: 1m, podRequests: {nvidia.com/gpu: 8}, duration: 1h,
     minRuntime: 1h}
"""))
    sweep = result["sweep"]
    assert sweep["preemptions"] == 1
    ran = sum(stop - start["at_s"] for start, stop in zip(
        sweep["starts"], [s["at_s"] for s in sweep["stops"]] + [sweep["finished_s"]],
        strict=True))
    assert ran == pytest.approx(1800.0)
    assert sweep["stopped_at_max_runtime"] is True


def test_a_scenario_maximum_below_its_minimum_is_refused_naming_the_field():
    with pytest.raises(InputError, match=r"workloads\[0\]\.maxRuntime.*below the min runtime"):
        simulate(TWO_TEAMS + """
workloads:
  - {name: x, queue: a, podRequests: {nvidia.com/gpu: 1}, duration: 1h, minRuntime: 1h,
     maxRuntime: 30m}
""")
