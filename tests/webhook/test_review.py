"""AdmissionReview v1 parsing and response building."""

import base64
import json

import pytest
from review_fixtures import job, review

from admitter.webhook.review import (
    ReviewError,
    allow,
    deny,
    deny_problems,
    parse_review,
    review_response,
)


def test_a_review_is_parsed_into_the_fields_handlers_use():
    old = job(suspend=True)
    request = parse_review(review(job(suspend=False), old, user="alice"))
    assert (request.kind, request.operation, request.namespace, request.name) == (
        "Job", "UPDATE", "team-a", "train"
    )
    assert request.username == "alice"
    assert request.object["spec"]["suspend"] is False
    assert request.old_object == old
    assert request.display_name == "Job team-a/train"


def test_a_generated_name_is_shown_as_its_prefix():
    obj = job()
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "train-"
    body = review(obj)
    body["request"]["name"] = ""
    assert parse_review(body).display_name == "Job team-a/train-*"


def test_a_delete_carries_the_deleted_object_as_both_objects():
    gone = job()
    body = review(gone, gone, operation="DELETE")
    body["request"]["object"] = None
    request = parse_review(body)
    assert request.operation == "DELETE"
    assert request.object == request.old_object == gone
    body["request"]["oldObject"] = None
    with pytest.raises(ReviewError, match=r"request\.oldObject"):
        parse_review(body)


@pytest.mark.parametrize(
    "body, complaint",
    [
        ([], "apiVersion admission.k8s.io/v1"),
        ({"apiVersion": "admission.k8s.io/v1beta1", "request": {}}, "apiVersion"),
        ({"apiVersion": "admission.k8s.io/v1", "request": {"object": {}}}, "request.uid"),
        ({"apiVersion": "admission.k8s.io/v1", "request": {"uid": "u"}}, "request.object"),
    ],
)
def test_a_body_that_is_not_a_review_is_rejected_saying_what_is_missing(body, complaint):
    with pytest.raises(ReviewError, match=complaint):
        parse_review(body)


def test_an_allowed_response_echoes_the_uid_and_encodes_the_patch():
    patch = [{"op": "add", "path": "/spec/suspend", "value": True}]
    answer = review_response("abc", allow(patch))
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == "abc" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == patch
    assert "status" not in response


def test_an_allowed_response_without_patch_has_no_patch_fields():
    assert review_response("abc", allow())["response"] == {"uid": "abc", "allowed": True}


def test_a_denial_carries_code_and_message():
    response = review_response("abc", deny("spec.suspend: no"))["response"]
    assert response == {
        "uid": "abc",
        "allowed": False,
        "status": {"code": 403, "message": "spec.suspend: no"},
    }


def test_problems_become_one_line_per_field():
    verdict = deny_problems("Job ns/x", [("spec.a", "bad"), ("spec.b", "worse")])
    assert verdict.code == 422
    assert verdict.message == "Job ns/x: 2 problem(s)\n  spec.a: bad\n  spec.b: worse"
