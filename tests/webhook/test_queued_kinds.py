"""The job webhooks treat every queued kind alike: created suspended, not unsuspended by its
owner before admitter admits it (the denial naming the kind), and moved to another queue only
while pending."""

import pytest
from review_fixtures import (
    POLICY,
    SUSPEND_PATCH,
    changed,
    queue_move_denial,
    request,
    standard_lookup,
    verdict,
)
from test_jobset_rules import jobset
from test_rayjob_rules import rayjob
from test_trainjob_rules import trainjob

from admitter.api.contract import QUEUE_LABEL
from admitter.webhook.jobs import mutate_job

KINDS = [pytest.param(jobset, id="JobSet"), pytest.param(rayjob, id="RayJob"),
         pytest.param(trainjob, id="TrainJob")]


@pytest.mark.parametrize("make", KINDS)
async def test_a_queued_job_of_each_kind_is_created_suspended(make):
    made = await mutate_job(request(make()), standard_lookup(), POLICY)
    assert made.allowed and made.patch[-len(SUSPEND_PATCH):] == SUSPEND_PATCH


@pytest.mark.parametrize("make", KINDS)
async def test_a_pending_job_of_each_kind_cannot_be_unsuspended_by_its_owner(make):
    pending = changed(make(), suspend=True)
    denied = await verdict(changed(pending, suspend=False), pending)
    kind = pending["kind"]
    assert not denied.allowed
    assert f"spec.suspend: alice may not unsuspend a {kind} that admitter has not admitted" in (
        denied.message)


@pytest.mark.parametrize("make", KINDS)
async def test_an_admitted_job_of_each_kind_stays_in_its_queue(make):
    denied = await queue_move_denial(make())
    assert not denied.allowed and f"metadata.labels[{QUEUE_LABEL}]" in denied.message
