"""What a Job's pod template asks of nodes reaches the Workload and the core: the effective
request as kube-scheduler counts it (native sidecars, init containers, overhead), tolerations,
nodeSelector and the user's own required node affinity (never admitter's topology pin)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from admitter.api.contract import ORIGINAL_AFFINITY_ANNOTATION, JobContract
from admitter.api.workload import Workload as WorkloadObject
from admitter.core.model import (
    GPU,
    Node,
    NodeSelection,
    Taint,
    Toleration,
)
from admitter.jobs.interface import pin_to_domain
from admitter.jobs.workloads import workload_for
from admitter.kube.core_values import core_workload
from admitter.kube.objects import pod_requests

from builders.core import requirement, term

CONTRACT = JobContract(3600, True, None, None)


def _container(name: str, cpu: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": {"cpu": cpu}}, **extra}


def test_native_sidecars_run_beside_the_containers() -> None:
    """A 1 CPU sidecar runs for the pod's whole life: with a 1 CPU container the pod needs 2
    CPU (the old count took the max: 1), with two such containers 3."""
    spec = {"initContainers": [_container("fetch", "1"),
                               _container("proxy", "1", restartPolicy="Always")],
            "containers": [_container("main", "1")]}
    assert pod_requests(spec) == {"cpu": Decimal(2)}
    spec["containers"].append(_container("worker", "1"))
    assert pod_requests(spec) == {"cpu": Decimal(3)}


def test_an_init_container_counts_with_the_sidecars_started_before_it() -> None:
    spec = {"initContainers": [_container("proxy", "2", restartPolicy="Always"),
                               _container("warmup", "5"),
                               _container("logs", "1", restartPolicy="Always")],
            "containers": [_container("main", "1")]}
    # Running: 1 + 2 + 1 = 4; while warmup runs: 5 + the 2 of proxy = 7.
    assert pod_requests(spec) == {"cpu": Decimal(7)}


def test_plain_init_containers_take_the_largest_and_overhead_adds() -> None:
    spec = {"initContainers": [_container("a", "3"), _container("b", "2")],
            "containers": [_container("main", "1"),
                           {"name": "gpu", "resources": {"limits": {GPU: "8"}}}],
            "overhead": {"cpu": "250m", "memory": "64Mi"}}
    assert pod_requests(spec) == {"cpu": Decimal("3.25"), GPU: Decimal(8),
                                  "memory": Decimal(64 * 2**20)}


AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad"]}],
         "matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}]},
    ]}}}


def _job(template_spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict:
    return {
        "metadata": {"name": "train", "namespace": "team-a", "uid": "u-1",
                     "labels": {"admitter.dev/queue-name": "default"},
                     "annotations": annotations or {}},
        "spec": {"parallelism": 2, "template": {"spec": {
            "containers": [{"name": "main", "resources": {"limits": {GPU: "8"}}}],
            **template_spec}}},
    }


def _core(job: dict[str, Any]):
    obj = workload_for(job, CONTRACT, priority=0)
    WorkloadObject.model_validate(obj)
    obj["metadata"]["creationTimestamp"] = "2026-11-29T10:00:00Z"
    return obj, core_workload(obj, "team-a", pods_ready=True).pod_sets[0]


def test_tolerations_selector_and_affinity_reach_the_core() -> None:
    obj, pod_set = _core(_job({
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": "dedicated", "value": "train", "tolerationSeconds": 30}],
        "nodeSelector": {"pool": "train"},
        "affinity": AFFINITY,
    }))
    assert obj["spec"]["podSets"][0]["nodeSelector"] == {"pool": "train"}
    assert pod_set.tolerations == (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),
                                   Toleration("dedicated", "Equal", "train", ""))
    assert pod_set.selection == NodeSelection(
        (("pool", "train"),),
        (term(requirement("gpu", "In", "h100")),
         term(requirement("gpus", "Gt", "4"),
              fields=(requirement("metadata.name", "NotIn", "bad"),))))
    tainted = (Taint("nvidia.com/gpu", "present"),)
    assert pod_set.admits(Node("n1", {GPU: 8}, {"pool": "train", "gpu": "h100"},
                               taints=tainted))
    assert not pod_set.admits(Node("bad", {GPU: 8}, {"pool": "train", "gpus": "8"}))
    assert not pod_set.admits(Node("n1", {GPU: 8}, {"pool": "train", "gpu": "h100"},
                                   taints=(Taint("nvidia.com/gpu", "present", "NoExecute"),)))


def test_a_plain_job_selects_every_node() -> None:
    obj, pod_set = _core(_job({}))
    assert set(obj["spec"]["podSets"][0]) == {"name", "count", "requests"}
    assert pod_set.tolerations == () and pod_set.selection == NodeSelection()


def test_the_users_affinity_is_read_without_admitters_pin() -> None:
    """An admitted Job's template carries the pin; its Workload keeps the user's terms only."""
    pinned = pin_to_domain(AFFINITY, {"topology.admitter.dev/rack": "rack-1"})
    job = _job({"affinity": pinned}, {ORIGINAL_AFFINITY_ANNOTATION: json.dumps(AFFINITY)})
    _, pod_set = _core(job)
    _, unpinned = _core(_job({"affinity": AFFINITY}))
    assert pod_set.selection == unpinned.selection
    assert all(r.key != "topology.admitter.dev/rack"
               for term in pod_set.selection.terms for r in term.expressions)
