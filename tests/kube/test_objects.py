"""Pure translations between Kubernetes JSON and admitter's values: Job → Workload object
(`jobs/workloads.py`), Workload object → the core's Workload (`kube/core_values.py`), a pod's
effective requests (`kube/objects.py`), affinity pinning, conditions."""

from __future__ import annotations

import copy
from decimal import Decimal

import pytest

from admitter.api.contract import ContractError, JobContract
from admitter.api.workload import CONDITION_ADMITTED, Reason
from admitter.api.workload import Workload as WorkloadObject
from admitter.controller.actions import with_condition
from admitter.core.decisions import PendingReason
from admitter.core.model import GPU, Phase, TopologyRequest
from admitter.jobs.interface import pin_to_domain
from admitter.jobs.workloads import job_contract, workload_for, workload_name
from admitter.kube.core_values import core_workload, pod_set_domains
from admitter.kube.objects import format_time, pod_requests

JOB = {
    "metadata": {"name": "train", "namespace": "team-a", "uid": "1234-abcd",
                 "labels": {"admitter.dev/queue-name": "default"}},
    "spec": {
        "parallelism": 4, "completions": 2,
        "template": {"spec": {
            "priorityClassName": "train",
            "containers": [
                {"name": "main", "resources": {"limits": {GPU: "8"},
                                               "requests": {"cpu": "30", "memory": "200Gi"}}},
                {"name": "sidecar", "resources": {"requests": {"cpu": "500m"}}},
            ],
            "initContainers": [{"name": "fetch", "resources": {"requests": {"cpu": "40"}}}],
        }},
    },
}


def test_pod_requests_sum_containers_and_take_the_largest_init_container():
    assert pod_requests(JOB["spec"]["template"]["spec"]) == {
        GPU: Decimal(8), "cpu": Decimal(40), "memory": Decimal(200 * 2**30)}


def test_workload_for_a_job_is_a_valid_owned_workload():
    contract = JobContract(min_runtime=7200, resumable=False, topology_required="rack",
                           topology_preferred=None)
    obj = workload_for(JOB, contract, priority=50)
    WorkloadObject.model_validate(obj)
    assert obj["metadata"]["name"] == workload_name(JOB) and obj["metadata"]["name"].startswith(
        "job-train-")
    assert obj["metadata"]["ownerReferences"][0]["uid"] == "1234-abcd"
    spec = obj["spec"]
    assert spec["podSets"] == [{"name": "main", "count": 2,
                                "requests": {GPU: 8, "cpu": 40, "memory": "200Gi"}}]
    assert (spec["priority"], spec["minRuntime"], spec["resumable"]) == (50, "2h", False)
    assert spec["topology"] == {"required": "rack"}


def test_core_workload_reads_the_admission_back():
    contract = JobContract(3600, True, None, None)
    obj = workload_for(JOB, contract, priority=0)
    obj["metadata"]["creationTimestamp"] = "2026-11-29T10:00:00Z"
    obj["status"] = {"admission": {
        "clusterQueue": "team-a", "admittedAt": "2026-11-29T10:05:00Z",
        "nodeHints": [{"podSet": "main", "node": "n1", "count": 2}]}}
    workload = core_workload(obj, "team-a", pods_ready=True)
    assert workload.phase is Phase.ADMITTED
    assert workload.admitted_at - workload.submitted_at == 300
    assert workload.placement == {"n1": 2} and workload.pod_set_placements == ({"n1": 2},)
    assert workload.requests()[GPU] == 16 and workload.min_runtime == 3600


def test_workloads_repeating_one_shape_share_their_core_pod_sets() -> None:
    contract = JobContract(3600, True, None, None)
    first, second = (workload_for(JOB, contract, priority=0) for _ in range(2))
    bigger = copy.deepcopy(first)
    bigger["spec"]["podSets"][0]["count"] = 3
    cores = [core_workload(obj, "team-a", pods_ready=True) for obj in (first, second, bigger)]
    assert cores[0].pod_sets is cores[1].pod_sets
    assert cores[2].pod_sets[0].count == 3 and cores[0].pod_sets[0].count == 2


def test_a_templates_own_topology_reaches_the_core_and_its_domain_is_read_back() -> None:
    job = copy.deepcopy(JOB)
    job["spec"]["template"]["metadata"] = {
        "annotations": {"admitter.dev/topology-preferred": "rack"}}
    contract = job_contract(job, max_min_runtime=86400, topology_levels=["block", "rack"])
    assert contract.pod_set_topology == ((None, "rack"),)
    obj = workload_for(job, contract, priority=0)
    WorkloadObject.model_validate(obj)
    assert obj["spec"]["podSets"][0]["topology"] == {"preferred": "rack"}
    obj["status"] = {"admission": {
        "clusterQueue": "team-a", "admittedAt": "2026-11-29T10:05:00Z",
        "topologyDomain": {"block": "b1"},
        "podSetDomains": [{"podSet": "main", "domain": {"block": "b1", "rack": "r2"}}]}}
    WorkloadObject.model_validate(obj)
    workload = core_workload(obj, "team-a", pods_ready=True)
    assert workload.pod_sets[0].topology == TopologyRequest(None, "rack")
    assert pod_set_domains(obj["status"]["admission"], workload.pod_sets) == (
        {"block": "b1", "rack": "r2"},)


def test_a_templates_unknown_topology_level_is_an_error_naming_the_template() -> None:
    job = copy.deepcopy(JOB)
    job["spec"]["template"]["metadata"] = {"annotations": {"admitter.dev/topology-required": "x"}}
    with pytest.raises(ContractError, match=r"^pod template spec.template: annotation "
                                            r"admitter.dev/topology-required='x' is not a"):
        job_contract(job, max_min_runtime=86400, topology_levels=["block", "rack"])


def test_pinning_narrows_every_required_term_and_keeps_the_rest():
    own = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]},
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["b200"]}]},
        ]}}, "podAntiAffinity": {"x": 1}}
    pinned = pin_to_domain(own, {"rack": "r3", "block": "b1"})
    terms = pinned["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert len(terms) == 2 and pinned["podAntiAffinity"] == {"x": 1}
    for term in terms:
        assert {"key": "rack", "operator": "In", "values": ["r3"]} in term["matchExpressions"]
        assert {"key": "block", "operator": "In", "values": ["b1"]} in term["matchExpressions"]
    assert own["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][-1]["key"] == "gpu", "input untouched"
    assert pin_to_domain(None, {}) is None


def test_condition_transition_time_moves_only_when_status_changes():
    first = with_condition([], CONDITION_ADMITTED, "False", PendingReason.NO_FIT, "waiting",
                           now=100)
    again = with_condition(first, CONDITION_ADMITTED, "False", PendingReason.NO_FIT,
                           "still waiting", now=200)
    assert again[0]["lastTransitionTime"] == format_time(100)
    flipped = with_condition(again, CONDITION_ADMITTED, "True", Reason.ADMITTED, "ok", now=300)
    assert flipped[0]["lastTransitionTime"] == format_time(300)
