"""The Job webhook refuses device claims admitter cannot charge to quota, naming the field,
the class or request and why, by the same rule the controller counts with; a template not
there yet only warns (the job waits for it, suspended)."""

from dataclasses import replace

from review_fixtures import NAMESPACE, POLICY, changed, job, request, standard_lookup

from admitter.testing.dra_driver import claim_template, claiming
from admitter.webhook.jobs import validate_job

POLICY_WITH_GPUS = replace(POLICY, device_classes={"gpu.nvidia.com": "nvidia.com/gpu"})
FIELD = "spec.template.spec.resourceClaims[0]"


def claiming_job(template: str) -> dict:
    obj = job(suspend=True)
    obj["spec"]["template"]["spec"] = claiming(obj["spec"]["template"]["spec"], template)
    return obj


def lookup_with(*templates):
    lookup = standard_lookup()
    lookup.objects.extend({**t, "kind": "ResourceClaimTemplate"} for t in templates)
    return lookup


async def test_a_claim_of_a_mapped_class_is_allowed():
    lookup = lookup_with(claim_template(NAMESPACE, "eight", 8))
    verdict = await validate_job(request(claiming_job("eight")), lookup, POLICY_WITH_GPUS)
    assert verdict.allowed, verdict.message
    assert not verdict.warnings


async def test_a_claim_of_an_unmapped_class_is_refused_naming_the_class_and_the_field():
    lookup = lookup_with(claim_template(NAMESPACE, "nics", 1, device_class_name="nic.example.com"))
    verdict = await validate_job(request(claiming_job("nics")), lookup, POLICY_WITH_GPUS)
    assert not verdict.allowed
    assert FIELD in verdict.message
    assert "DeviceClass 'nic.example.com' has no quota resource" in verdict.message


async def test_allocation_mode_all_is_refused():
    lookup = lookup_with(claim_template(NAMESPACE, "every", 1, allocationMode="All"))
    verdict = await validate_job(request(claiming_job("every")), lookup, POLICY_WITH_GPUS)
    assert not verdict.allowed and "allocationMode All" in verdict.message


async def test_without_mappings_any_claim_is_refused_without_reading_templates():
    lookup = lookup_with(claim_template(NAMESPACE, "eight", 8))
    verdict = await validate_job(request(claiming_job("eight")), lookup, POLICY)
    assert not verdict.allowed and "deviceClassMappings is empty" in verdict.message
    assert "ResourceClaimTemplate" not in lookup.reads


async def test_a_template_not_there_yet_is_a_warning_not_a_denial():
    verdict = await validate_job(request(claiming_job("later")), standard_lookup(),
                                 POLICY_WITH_GPUS)
    assert verdict.allowed
    assert verdict.warnings == [f"{FIELD}: ResourceClaimTemplate 'later' is not in namespace "
                                f"{NAMESPACE!r}; the job is queued once it exists"]


async def test_an_update_that_leaves_the_claims_alone_is_not_checked_again():
    old = claiming_job("nics")  # made before the mapping changed, say
    new = changed(old, annotations={"note": "x"})
    verdict = await validate_job(request(new, old), standard_lookup(), POLICY_WITH_GPUS)
    assert verdict.allowed, verdict.message
