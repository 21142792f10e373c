"""Every kind round-trips YAML → model → YAML, and bad values fail naming field and value;
the example jobs of other kinds are ones admitter queues."""

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from admitter.api.clusterqueue import ClusterQueue
from admitter.api.crds import KINDS
from admitter.api.errors import InputError
from admitter.api.localqueue import LocalQueue
from admitter.api.topology import Topology
from admitter.api.workercluster import WorkerCluster
from admitter.api.workload import Workload
from admitter.jobs.interface import ReadsRuntimes, RefusesSpecs
from admitter.jobs.registry import SUSPENDABLE, job_of

MANIFESTS = Path(__file__).parents[2] / "examples" / "manifests"
BY_KIND = {kind.kind_name: kind for kind in KINDS}


def _wc(name: str = "west", **spec: object) -> dict:
    """A WorkerCluster document with `spec` over a valid one."""
    return {"metadata": {"name": name}, "spec": {"kubeconfig": {"name": "west-kubeconfig"},
                                                 **spec}}


def _documents(ours: bool = True):
    """The examples of admitter's own kinds, or (`ours` False) of the jobs it queues."""
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for index, document in enumerate(yaml.safe_load_all(path.read_text())):
            if document["apiVersion"].startswith("admitter.dev/") == ours:
                yield pytest.param(document, id=f"{path.name}[{index}]-{document['kind']}")


@pytest.mark.parametrize("document", list(_documents()))
def test_examples_round_trip(document):
    model = BY_KIND[document["kind"]].model_validate(document)
    dumped = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert yaml.safe_load(yaml.safe_dump(dumped)) == document


@pytest.mark.parametrize("document", list(_documents(ours=False)))
def test_example_jobs_are_of_kinds_admitter_queues(document):
    kind = job_of(document)
    assert document["apiVersion"] == kind.api_version and kind.kind in SUSPENDABLE
    if isinstance(kind, ReadsRuntimes):  # its pod sets are in a runtime its operator ships
        assert all(value for value in kind.size_fields(document).values())
    else:
        assert all(pod_set.count > 0 for pod_set in kind.pod_sets(document))
    assert not isinstance(kind, RefusesSpecs) or kind.unsupported(document) == []


def test_every_kind_has_an_example():
    kinds = {document.values[0]["kind"] for document in _documents()}
    assert kinds == set(BY_KIND)


def test_quantities_are_stored_canonically():
    queue = ClusterQueue.model_validate(
        {"metadata": {"name": "q"}, "spec": {"resources": {"memory": {"quota": "1.5Gi"}}}}
    )
    spec = queue.model_dump(mode="json", by_alias=True)["spec"]
    assert spec["resources"]["memory"]["quota"] == "1536Mi"
    assert spec["resources"]["memory"]["limit"] == -1
    assert spec["resources"]["memory"]["overQuotaWeight"] == 1.0


def _problems(kind, document):
    with pytest.raises(ValidationError) as caught:
        kind.model_validate(document)
    return InputError.from_validation("input.yaml", caught.value).problems


def _cq(**spec):
    return {"metadata": {"name": "team-a"}, "spec": spec}


@pytest.mark.parametrize(
    ("kind", "document", "path", "fragment"),
    [
        (ClusterQueue, _cq(resources={"nvidia.com/gpu": {"quota": -2}}),
         "spec.resources.nvidia.com/gpu", "quota must be -1 or not negative, got -2"),
        (ClusterQueue, _cq(resources={"nvidia.com/gpu": {"quota": 8, "limit": 4}}),
         "spec.resources.nvidia.com/gpu", "limit 4 is below quota 8"),
        (ClusterQueue, _cq(resources={"cpu": {"overQuotaWeight": -1}}),
         "spec.resources.cpu.overQuotaWeight", "-1"),
        (ClusterQueue, _cq(resources={"nvidia.com/gpu": {"quota": "lots"}}),
         "spec.resources.nvidia.com/gpu.quota", "'lots' is not a quantity"),
        (ClusterQueue, _cq(resources={"Not A Resource": {"quota": 1}}),
         "spec.resources.Not A Resource", "'Not A Resource' is not a resource name"),
        (ClusterQueue, _cq(maxMinRuntime="8 hours"),
         "spec.maxMinRuntime", "'8 hours' is not a duration"),
        (ClusterQueue, _cq(parentQueue="org"), "spec.parentQueue", "unknown key"),
        (ClusterQueue, {"metadata": {"name": "Team_A"}}, "metadata.name", "'Team_A'"),
        (LocalQueue, {"metadata": {"name": "lq", "namespace": "a"}, "spec": {}},
         "spec.clusterQueue", "Field required"),
        (Topology, {"metadata": {"name": "t"}, "spec": {"levels": [
            {"nodeLabel": "rack"}, {"nodeLabel": "rack"}]}},
         "spec.levels", "node label 'rack' appears twice"),
        (Workload, {"metadata": {"name": "w", "namespace": "a"}, "spec": {
            "queueName": "q", "podSets": [{"name": "main", "count": 0}]}},
         "spec.podSets[0].count", "greater than or equal to 1 (got 0)"),
        (Workload, {"metadata": {"name": "w", "namespace": "a"}, "spec": {
            "queueName": "q", "minRuntime": "-5m",
            "podSets": [{"name": "main", "count": 1}]}},
         "spec.minRuntime", "'-5m' is not a duration"),
        (WorkerCluster, _wc("west.1"), "metadata", "name 'west.1' is not a cluster name"),
        (WorkerCluster, _wc(labels={"bad key!": "x"}), "spec.labels",
         "'bad key!' is not a label key"),
        (WorkerCluster, _wc(labels={"region": "us west"}), "spec.labels",
         "'region': 'us west' is not a label value"),
        (WorkerCluster, _wc(labels={"admitter.dev/cluster": "east"}), "spec.labels",
         "do not set it (got 'east')"),
        (WorkerCluster, _wc(kubeconfig={"name": "s", "key": "../kubeconfig"}),
         "spec.kubeconfig.key", "(got '../kubeconfig')"),
        (WorkerCluster, {"metadata": {"name": "west"}, "spec": {"kubeconfigPath": "/etc/k"}},
         "spec.kubeconfigPath", "unknown key"),
    ],
)
def test_bad_values_name_field_and_value(kind, document, path, fragment):
    problems = _problems(kind, document)
    assert any(p == path and fragment in why for p, why in problems), problems


def test_input_error_lists_every_problem_with_its_source():
    document = _cq(resources={"nvidia.com/gpu": {"quota": "x"}, "cpu": {"limit": "y"}})
    with pytest.raises(ValidationError) as caught:
        ClusterQueue.model_validate(document)
    text = str(InputError.from_validation("queues.yaml", caught.value))
    assert text.startswith("queues.yaml: 2 problem(s)")
    assert "spec.resources.nvidia.com/gpu.quota: 'x' is not a quantity" in text
    assert "spec.resources.cpu.limit: 'y' is not a quantity" in text
