"""The placement webhook: a pod whose template names its pod set is created held by the
placement gate; any other pod, and a pod bound already, passes untouched."""

from __future__ import annotations

import pytest
from review_fixtures import NAMESPACE, request

from admitter.kube.objects import ADMISSION_GATE, PLACEMENT_GATE, POD_SET_LABEL
from admitter.webhook.pods import gate_pod


def pod(labels: dict[str, str] | None = None, **spec: object) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "train-0", "namespace": NAMESPACE, "labels": labels or {}},
            "spec": {"containers": [{"name": "c"}], **spec}}


def test_a_pod_of_a_started_job_is_created_held_by_the_placement_gate():
    verdict = gate_pod(request(pod({POD_SET_LABEL: "main"})))
    assert verdict.allowed
    assert verdict.patch == [{"op": "add", "path": "/spec/schedulingGates",
                              "value": [{"name": PLACEMENT_GATE}]}]


def test_the_gate_joins_gates_of_others_once():
    others = pod({POD_SET_LABEL: "main"}, schedulingGates=[{"name": ADMISSION_GATE}])
    assert gate_pod(request(others)).patch == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": PLACEMENT_GATE}}]
    held = pod({POD_SET_LABEL: "main"}, schedulingGates=[{"name": PLACEMENT_GATE}])
    assert not gate_pod(request(held)).patch


@pytest.mark.parametrize("given", [
    pod({"batch.kubernetes.io/job-name": "train"}),
    pod({POD_SET_LABEL: "main"}, nodeName="gpu-1"),
], ids=["not a started job's pod", "bound already"])
def test_other_pods_pass_untouched(given):
    verdict = gate_pod(request(given))
    assert verdict.allowed and not verdict.patch
