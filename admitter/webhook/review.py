"""AdmissionReview v1: read the request the API server sends, build the response it expects."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from admitter.api.errors import InputError

API_VERSION = "admission.k8s.io/v1"

JsonPatch = list[dict[str, Any]]


class ReviewError(ValueError):
    """The body is not an AdmissionReview v1 request (answered with HTTP 400)."""


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of `AdmissionReview.request` the handlers decide on."""

    uid: str
    kind: str
    operation: str
    namespace: str
    name: str
    username: str
    object: dict[str, Any]
    old_object: dict[str, Any] | None = None

    @property
    def display_name(self) -> str:
        """`kind ns/name` for messages; a generateName prefix stands in for a missing name."""
        metadata = self.object.get("metadata") or {}
        name = self.name or metadata.get("name") or f"{metadata.get('generateName', '')}*"
        return f"{self.kind} {self.namespace}/{name}" if self.namespace else f"{self.kind} {name}"


@dataclass(frozen=True)
class Verdict:
    """A handler's answer: allowed (maybe with a JSON patch) or denied with a message."""

    allowed: bool
    message: str = ""
    code: int = 200
    patch: JsonPatch = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """Shown by kubectl as `Warning: ...` (the request still goes through)."""


def allow(patch: JsonPatch | None = None, warnings: list[str] | None = None) -> Verdict:
    return Verdict(True, patch=patch or [], warnings=warnings or [])


def deny(message: str, code: int = 403) -> Verdict:
    return Verdict(False, message, code)


def deny_problems(source: str, problems: Sequence[tuple[str, str]]) -> Verdict:
    """Deny with every problem on its own line, each naming the field (422 Invalid)."""
    return deny(str(InputError(source, list(problems))), 422)


def parse_review(body: Any) -> AdmissionRequest:
    """The request inside an AdmissionReview v1 body; ReviewError says what is missing."""
    if not isinstance(body, dict) or body.get("apiVersion") != API_VERSION:
        raise ReviewError(f"expected an AdmissionReview with apiVersion {API_VERSION}")
    request = body.get("request")
    if not isinstance(request, dict) or not request.get("uid"):
        raise ReviewError("the AdmissionReview has no request.uid")
    operation = request.get("operation", "")
    # A DELETE carries the object being deleted as oldObject only; handlers see it as both.
    new = request.get("oldObject" if operation == "DELETE" else "object")
    if not isinstance(new, dict):
        missing = "oldObject" if operation == "DELETE" else "object"
        raise ReviewError(f"the AdmissionReview has no request.{missing}")
    return AdmissionRequest(
        uid=request["uid"],
        kind=(request.get("kind") or {}).get("kind", ""),
        operation=operation,
        namespace=request.get("namespace") or "",
        name=request.get("name") or "",
        username=(request.get("userInfo") or {}).get("username", ""),
        object=new,
        old_object=request.get("oldObject"),
    )


def review_response(uid: str, verdict: Verdict) -> dict[str, Any]:
    """The AdmissionReview the API server expects back; the patch travels base64-encoded."""
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {"code": verdict.code, "message": verdict.message}
    if verdict.warnings:
        response["warnings"] = verdict.warnings
    if verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(verdict.patch).encode()).decode()
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
