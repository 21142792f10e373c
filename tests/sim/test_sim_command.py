"""`admitter simulate` end to end: files written, byte-identical results, bad input named."""

import json
import re
import sys
from pathlib import Path

from admitter.api.scenario_file import load_scenario
from admitter.cli import main
from admitter.sim.checks import check_simulatable

EXAMPLES = Path(__file__).parents[2] / "examples"


def _without_wall(text: str) -> dict:
    result = json.loads(text)
    assert result["summary"].pop("wall_s") >= 0
    return result


def test_out_writes_result_report_and_plots(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", str(EXAMPLES / "kai-fairshare.yaml"), "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == {
        "result.json", "report.md", "allocation.png", "owed_delivered.png", "waits.png",
        "dashboard.html"}
    assert all((out / name).read_bytes()[:4] == b"\x89PNG" for name in (
        "allocation.png", "owed_delivered.png", "waits.png"))
    report = (out / "report.md").read_text()
    assert "| inference |" in report and "![waits.png](waits.png)" in report
    printed = capsys.readouterr().out
    assert "owed GPU-hours delivered" in printed and "research" in printed
    result = json.loads((out / "result.json").read_text())
    # The KAI example's gangs take the whole cluster in turn: serve, then the two gangs ranked
    # alike, longest-waiting first (submitted together: by name), and none requeues the other.
    waits = {w["name"]: w["wait_s"] for w in result["workloads"]}
    assert waits == {"serve": 0.0, "explore": 3600.0, "train": 3 * 3600.0}
    assert set(result) == {"summary", "queues", "classes", "workloads"}
    assert {"simulated_s", "wall_s", "occupancy", "owed_delivered_ratio", "preemptions",
            "wasted_gpu_hours", "unfinished"} <= set(result["summary"])


def test_out_writes_the_dashboards_page_filled_from_the_simulation(tmp_path):
    out = tmp_path / "run"
    assert main(["simulate", str(EXAMPLES / "kai-fairshare.yaml"), "--out", str(out)]) == 0
    page = (out / "dashboard.html").read_text()
    result = json.loads((out / "result.json").read_text())
    shown = {name: (float(used), float(owed)) for name, used, owed in re.findall(
        r'data-queue="([^"]+)" data-held="[^"]*" data-budget="[^"]*" data-used="([^"]*)" '
        r'data-owed="([^"]*)"', page)}
    for leaf, figures in result["queues"].items():
        assert shown[leaf] == (round(figures["delivered_gpu_hours"], 1),
                               round(figures["owed_gpu_hours"], 1)), leaf
    assert '<section id="gpus"><svg' in page and "<script>" not in page, "static: no stream"


def test_same_file_same_result_byte_for_byte_except_wall_time(tmp_path):
    scenario = str(EXAMPLES / "topology.yaml")
    first, second = tmp_path / "1.json", tmp_path / "2.json"
    assert main(["simulate", scenario, "--json", str(first), "--seed", "7"]) == 0
    assert main(["simulate", scenario, "--json", str(second), "--seed", "7"]) == 0
    one, two = first.read_text(), second.read_text()
    strip = [line for line in one.splitlines() if '"wall_s"' not in line]
    assert strip == [line for line in two.splitlines() if '"wall_s"' not in line]
    assert _without_wall(one) == _without_wall(two)


def _topology_domain(node: str, level: str) -> str:
    block, rack, _ = node.split("-")
    return block if level == "block" else rack


def test_topology_example_keeps_gangs_in_their_required_domain(tmp_path):
    out = tmp_path / "t.json"
    assert main(["simulate", str(EXAMPLES / "topology.yaml"), "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    levels = {"rack-gang": "rack", "block-gang": "block"}
    checked = 0
    for workload in result["workloads"]:
        level = levels.get(workload["class"])
        for start in workload["starts"] if level else []:
            assert len({_topology_domain(n, level) for n in start["nodes"]}) == 1, workload
            checked += 1
    block_gangs = [w for w in result["workloads"] if w["class"] == "block-gang"]
    # 6 nodes never fit a 4-node rack: a block gang always spans both racks of its block.
    assert block_gangs and all(
        len({_topology_domain(n, "rack") for n in s["nodes"]}) == 2
        for w in block_gangs for s in w["starts"])
    assert checked > 10


def test_ai2_week_example_is_valid():
    path = EXAMPLES / "ai2-week.yaml"
    scenario = load_scenario(path)
    check_simulatable(scenario, str(path))
    leaves = [q.name for q in scenario.queues if q.parent is not None]
    assert len(leaves) == 15 and len({q.parent for q in scenario.queues if q.parent}) == 3
    assert sum(n.count * 8 for n in scenario.cluster.node_groups) == 256


BAD = """
cluster:
  topology: [rack]
  nodeGroups:
    - {count: 2, namePrefix: n-, capacity: {nvidia.com/gpu: 8}, labels: {rack: r0}}
    - {count: 2, namePrefix: m-, capacity: {nvidia.com/gpu: 8}, labels: {rack: r1}}
queues:
  - {name: team}
workloads:
  - {name: x, queue: team, count: 2, podRequests: {nvidia.com/gpu: 1}, duration: 1h}
  - {name: x-1, queue: team, podRequests: {nvidia.com/gpu: 1}, duration: 1h}
  - {name: big, queue: team, pods: 3, podRequests: {nvidia.com/gpu: 8}, duration: 1h,
     topology: {required: rack}}
  - {name: huge, queue: team, pods: 5, podRequests: {nvidia.com/gpu: 8}, duration: 1h}
"""


def test_bad_scenario_fails_before_simulating_naming_file_path_and_why(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: 3 problem(s)" in err
    assert "workloads[1].name: instance 'x-1' is also produced by workloads[0]" in err
    assert "workloads[2].pods: a gang of 3 pods never fits: one 'rack' domain holds at most 2" in (
        err)
    assert "workloads[3].pods: a gang of 5 pods never fits: the whole cluster holds at most 4" in (
        err)



def test_out_without_the_sim_extra_names_it_before_simulating(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the extra were not installed
    out = tmp_path / "run"
    assert main(["simulate", str(EXAMPLES / "kai-fairshare.yaml"), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "need matplotlib" in error and "pip install 'admitter[sim]'" in error
    assert not out.exists()
