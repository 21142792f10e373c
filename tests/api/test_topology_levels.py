"""One topology-level rule: a Topology's levels plus the host level, from the first Topology by
name; the webhook, the controller and the scenario loader all ask `cluster_levels` or
`with_host_level`, so a level one accepts is one the others know."""

from __future__ import annotations

import pytest

from admitter.api.convert import cluster_levels, topology_levels
from admitter.api.scenario import Scenario
from admitter.core.topology import HOSTNAME, with_host_level

from builders.core import BLOCK, RACK


def test_the_host_level_is_last_whether_listed_or_not() -> None:
    assert with_host_level([BLOCK, RACK]) == (BLOCK, RACK, HOSTNAME)
    assert with_host_level([BLOCK, RACK, HOSTNAME]) == (BLOCK, RACK, HOSTNAME)
    assert with_host_level([]) == (HOSTNAME,)
    with pytest.raises(ValueError, match="finest topology level"):
        with_host_level([HOSTNAME, RACK])


def test_the_first_topology_by_name_gives_the_cluster_its_levels() -> None:
    assert cluster_levels({}) is None
    assert cluster_levels({"zones": ["zone"], "default": [BLOCK, RACK]}) == (
        BLOCK, RACK, HOSTNAME)


def test_a_scenario_gets_the_same_levels() -> None:
    scenario = Scenario.model_validate({
        "cluster": {"topology": [RACK], "nodeGroups": [
            {"count": 1, "namePrefix": "n", "capacity": {"nvidia.com/gpu": 8}}]},
        "queues": [{"name": "q"}]})
    assert topology_levels(scenario) == (RACK, HOSTNAME)

