"""A pod set's demand includes the devices its pods claim through DRA: exact-count requests
of a mapped DeviceClass count as the mapped quota resource, per pod, for every kind; what
cannot be counted is refused, naming the claim, the request and why."""

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from admitter.api.contract import JobContract
from admitter.controller.converge import equivalent
from admitter.jobs.claims import DeviceClaims, MissingTemplate, UncountableClaim
from admitter.jobs.registry import JobKinds
from admitter.jobs.workloads import workload_for
from admitter.kube.devices import class_label
from admitter.testing.dra_driver import claim_template, claiming

from builders.kube import JobWrapper

NAMESPACE = "team-a"
GPU = "nvidia.com/gpu"
CLASSES = {"gpu.nvidia.com": GPU, "mig.nvidia.com": "nvidia.com/mig-1g.10gb"}


def templates(*objects):
    by_name = {(t["metadata"]["namespace"], t["metadata"]["name"]): t for t in objects}
    return lambda namespace, name: by_name.get((namespace, name))


def with_requests(name, *requests):
    """A template of several device requests, each an `exactly` or a `firstAvailable`."""
    template = claim_template(NAMESPACE, name, 1)
    template["spec"]["spec"]["devices"]["requests"] = [
        {"name": f"r{i}", **request} for i, request in enumerate(requests)]
    return template


def pod(*template_names, gpus=0):
    spec = {"containers": [{"name": "main", "resources": {"limits": {GPU: str(gpus)}}}]}
    spec = claiming(spec, template_names[0]) if template_names else spec
    spec["resourceClaims"] = [{"name": f"c{i}", "resourceClaimTemplateName": name}
                              for i, name in enumerate(template_names)]
    if gpus:
        spec["containers"][0]["resources"]["limits"] = {GPU: str(gpus)}
    return spec


def claims(*objects, classes=CLASSES):
    return DeviceClaims(classes, templates(*objects))


def refusal(counting, spec) -> UncountableClaim:
    with pytest.raises(UncountableClaim) as refused:
        counting.requests(NAMESPACE, spec)
    return refused.value


def test_an_exact_count_request_counts_as_its_mapped_resource():
    counting = claims(claim_template(NAMESPACE, "eight", 8))
    assert counting.requests(NAMESPACE, pod("eight")) == {GPU: Decimal(8)}


def test_count_defaults_to_one_and_allocation_mode_to_exact_count():
    counting = claims(with_requests("one", {"exactly": {"deviceClassName": "gpu.nvidia.com"}}))
    assert counting.requests(NAMESPACE, pod("one")) == {GPU: Decimal(1)}


def test_requests_and_claims_add_up_per_resource_and_beside_container_gpus():
    counting = claims(
        with_requests("mixed", {"exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
                      {"exactly": {"deviceClassName": "mig.nvidia.com", "count": 3}}),
        claim_template(NAMESPACE, "four", 4))
    assert counting.requests(NAMESPACE, pod("mixed", "four")) == {
        GPU: Decimal(6), "nvidia.com/mig-1g.10gb": Decimal(3)}
    kinds = JobKinds(claims=counting)
    assert kinds.pod_demand(NAMESPACE, pod("four", gpus=1))[GPU] == Decimal(5)


@given(st.lists(st.integers(1, 64), min_size=1, max_size=6))
def test_demand_is_the_sum_of_the_exact_counts(counts):
    template = with_requests("many", *({"exactly": {"deviceClassName": "gpu.nvidia.com",
                                                    "count": count}} for count in counts))
    assert claims(template).requests(NAMESPACE, pod("many")) == {GPU: Decimal(sum(counts))}


def test_first_available_alternatives_of_one_class_and_count_are_counted():
    same = {"firstAvailable": [
        {"name": "h100", "deviceClassName": "gpu.nvidia.com", "count": 2},
        {"name": "a100", "deviceClassName": "gpu.nvidia.com", "count": 2}]}
    assert claims(with_requests("either", same)).requests(NAMESPACE, pod("either")) == {
        GPU: Decimal(2)}


def test_first_available_alternatives_that_differ_are_refused_naming_them():
    differ = {"firstAvailable": [
        {"name": "whole", "deviceClassName": "gpu.nvidia.com", "count": 1},
        {"name": "slice", "deviceClassName": "mig.nvidia.com", "count": 2}]}
    refused = refusal(claims(with_requests("either", differ)), pod("either"))
    assert refused.field == "resourceClaims[0]"
    assert "ResourceClaimTemplate 'either' request 'r0'" in refused.message
    assert "1 of gpu.nvidia.com, 2 of mig.nvidia.com" in refused.message


def test_a_device_class_with_no_mapping_is_refused_naming_the_class():
    template = claim_template(NAMESPACE, "nics", 1, device_class_name="nic.example.com")
    refused = refusal(claims(template), pod("nics"))
    assert "DeviceClass 'nic.example.com' has no quota resource" in refused.message
    assert "gpu.nvidia.com, mig.nvidia.com" in refused.message
    assert "'nics'" in str(refused)


def test_an_admin_access_request_is_not_charged():
    watching = with_requests("watch", {"exactly": {"deviceClassName": "nic.example.com",
                                                   "adminAccess": True, "count": 8}},
                             {"exactly": {"deviceClassName": "gpu.nvidia.com"}})
    assert claims(watching).requests(NAMESPACE, pod("watch")) == {GPU: Decimal(1)}


def test_allocation_mode_all_is_refused():
    template = claim_template(NAMESPACE, "all", 1, allocationMode="All")
    refused = refusal(claims(template), pod("all"))
    assert "allocationMode All" in refused.message


def test_a_shared_resource_claim_referenced_by_name_is_refused():
    spec = {"containers": [{"name": "main"}],
            "resourceClaims": [{"name": "shared", "resourceClaimName": "team-gpus"}]}
    refused = refusal(claims(), spec)
    assert refused.field == "resourceClaims[0]"
    assert "ResourceClaim 'team-gpus'" in refused.message and "shares" in refused.message


def test_a_missing_template_is_told_apart_so_the_job_waits_for_it():
    with pytest.raises(MissingTemplate, match="'later' is not in namespace 'team-a'"):
        claims().requests(NAMESPACE, pod("later"))


def test_with_no_mapping_at_all_every_claim_is_refused():
    refused = refusal(claims(claim_template(NAMESPACE, "eight", 8), classes={}), pod("eight"))
    assert "deviceClassMappings is empty" in refused.message


def test_a_pod_without_claims_demands_nothing_more():
    assert claims().requests(NAMESPACE, pod(gpus=8)) == {}


def test_the_workload_charges_count_times_per_pod_and_selects_nodes_with_the_class():
    job = JobWrapper("train", NAMESPACE).pods(3).gpus(0).obj()
    job["metadata"]["uid"] = "uid-1"
    job["spec"]["template"]["spec"] = claiming(job["spec"]["template"]["spec"], "eight")
    kinds = JobKinds(claims=claims(claim_template(NAMESPACE, "eight", 8)))
    wl = workload_for(job, JobContract(3600.0, True, None, None), 0, kinds)
    (pod_set,) = wl["spec"]["podSets"]
    assert pod_set["count"] == 3 and str(pod_set["requests"][GPU]) == "8"
    assert pod_set["nodeSelector"] == {class_label("gpu.nvidia.com"): "true"}
    assert equivalent(job, wl, kinds)
    bigger = JobKinds(claims=claims(claim_template(NAMESPACE, "eight", 16)))
    assert not equivalent(job, wl, bigger), "a template charged otherwise is a change"
    assert equivalent(job, wl, JobKinds(claims=claims())), "a template gone: the charge stands"
    fewer = JobWrapper("train", NAMESPACE).pods(2).gpus(0).obj()
    fewer["spec"]["template"]["spec"] = claiming(fewer["spec"]["template"]["spec"], "eight")
    assert not equivalent(fewer, wl, JobKinds(claims=claims())), "the pod count still counts"


def test_a_workload_cannot_be_made_for_a_claim_that_cannot_be_counted():
    job = JobWrapper("train", NAMESPACE).gpus(0).obj()
    job["metadata"]["uid"] = "uid-1"
    job["spec"]["template"]["spec"] = claiming(job["spec"]["template"]["spec"], "nics")
    kinds = JobKinds(claims=claims(
        claim_template(NAMESPACE, "nics", 1, device_class_name="nic.example.com")))
    with pytest.raises(UncountableClaim, match=r"nic\.example\.com"):
        workload_for(job, JobContract(3600.0, True, None, None), 0, kinds)
