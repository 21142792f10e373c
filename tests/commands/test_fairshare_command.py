"""The fair-share vectors (tests/data/fairshare.yaml: cases from KAI Scheduler's proportion plugin
tests and the KAI deep dive), loaded through the scenario models, pass exactly."""

import json
from pathlib import Path

import pytest
import yaml

from admitter.api.scenario_file import parse_scenario
from admitter.cli import main
from admitter.commands.fairshare import fair_share_at_start, shares_by_queue

VECTORS = Path(__file__).parents[1] / "data" / "fairshare.yaml"


def _cases():
    for case in yaml.safe_load(VECTORS.read_text())["cases"]:
        yield pytest.param(case, id=case["name"])


@pytest.mark.parametrize("case", list(_cases()))
def test_shared_vector(case):
    scenario = parse_scenario(case["scenario"], case["name"])
    shares = shares_by_queue(scenario, fair_share_at_start(scenario))
    for queue, expected in case["expect"].items():
        for resource, amount in expected.items():
            assert shares[queue][resource] == amount, (queue, resource, shares)


def test_vectors_file_is_present_and_non_trivial():
    assert len(list(_cases())) >= 10


SCENARIO = """
name: small
cluster:
  nodeGroups: [{count: 2, namePrefix: n-, capacity: {nvidia.com/gpu: 8, cpu: 64, memory: 512Gi}}]
queues:
  - {name: a, resources: {nvidia.com/gpu: {quota: 4}, cpu: {quota: 8}}}
  - {name: b, resources: {nvidia.com/gpu: {quota: 4}}}
workloads:
  - {name: x, queue: a, pods: 2, podRequests: {nvidia.com/gpu: 4, cpu: 500m},
     duration: 1h, minRuntime: 1h}
  - {name: y, queue: b, count: 3, pods: 1, podRequests: {nvidia.com/gpu: 4},
     duration: 1h, minRuntime: 1h}
  - {name: later, queue: b, submit: 1h, podRequests: {nvidia.com/gpu: 8},
     duration: 1h, minRuntime: 1h}
  - {name: free, queue: a, podRequests: {nvidia.com/gpu: 8}, duration: 1h}
"""


def test_json_output(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    assert main(["fairshare", str(path), "--json"]) == 0
    shares = json.loads(capsys.readouterr().out)["queues"]
    # Unfunded and later workloads are not demand at time 0: a wants 8 GPUs, b wants 12.
    assert shares["a"]["nvidia.com/gpu"] == 8
    assert shares["b"]["nvidia.com/gpu"] == 8
    assert shares["a"]["cpu"] == 1
    assert shares["b"]["memory"] == 0


def test_table_output(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    assert main(["fairshare", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Fair share at time 0" in out and "nvidia.com/gpu" in out


def test_bad_tree_names_the_queue(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("{name: b,", "{name: b, parent: b,"))
    assert main(["fairshare", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "queues[1]" in err and "'b'" in err and "cycle" in err


def test_missing_file_is_a_clear_error(tmp_path, capsys):
    assert main(["fairshare", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err
