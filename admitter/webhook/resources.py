"""Validation of admitter's own objects: the pydantic model first, then the references the
CRD schema cannot check (a ClusterQueue's parent, a LocalQueue's leaf ClusterQueue, a
Workload's LocalQueue and levels).

References are checked on CREATE and when they change, so an edit elsewhere later does not
block unrelated edits of an object. Making a leaf that has workloads into a parent is
allowed (the controller stops admitting into it); pointing a LocalQueue at a parent is not.
A ClusterQueue with children cannot be deleted (its subtree would lose its quota and its
place); anything else may always be deleted, even an object that no longer validates.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from admitter.api.base import Resource
from admitter.api.clusterqueue import ClusterQueue
from admitter.api.errors import InputError
from admitter.api.localqueue import LocalQueue
from admitter.api.topology import Topology
from admitter.api.workload import Workload
from admitter.webhook.jobs import JobPolicy
from admitter.webhook.lookup import Lookup
from admitter.webhook.review import AdmissionRequest, Verdict, allow, deny, deny_problems
from admitter.webhook.workloads import frozen_spec_problems, reference_problems

KINDS: dict[str, type[Resource]] = {
    kind.kind_name: kind for kind in (ClusterQueue, LocalQueue, Topology, Workload)
}
"""The kinds `validate_resource` checks; the webhook configuration registers exactly these."""

Problem = tuple[str, str]
NAMES_SHOWN = 10
"""Most ClusterQueue names a refusal lists, the rest counted: a cluster may hold hundreds, and
ten show what a valid name looks like while the refusal stays a few lines."""


async def validate_resource(
    request: AdmissionRequest, lookup: Lookup, policy: JobPolicy
) -> Verdict:
    """Allow a valid object; deny with every problem and its field path otherwise."""
    kind = KINDS.get(request.kind)
    if kind is None:
        return allow()
    source = request.display_name
    problems: list[Problem] = []
    if request.operation == "DELETE":
        if kind is ClusterQueue:
            problems = list(_children_problems(request.name, await lookup.cluster_queues()))
        return deny_problems(source, problems) if problems else allow()
    old, old_spec = request.old_object, _spec(request.old_object)
    if old is not None and old_spec == _spec(request.object):
        # Metadata only (labels, finalizers, the garbage collector's edits): the API server
        # checks those, and an object stored before a stricter rule must stay manageable.
        return allow()
    try:
        resource = kind.model_validate(request.object)
    except ValidationError as error:
        return deny(str(InputError.from_validation(source, error)), 422)
    if isinstance(resource, ClusterQueue):
        if old is None or old_spec.get("parent") != resource.spec.parent:
            problems += _parent_problems(resource, await lookup.cluster_queues())
    elif isinstance(resource, LocalQueue):
        target = resource.spec.cluster_queue
        if old is None or old_spec.get("clusterQueue") != target:
            problems += _leaf_problems(target, await lookup.cluster_queues())
    elif isinstance(resource, Workload) and request.username not in policy.controller_usernames:
        if old is not None:
            problems += frozen_spec_problems(request.object, old)
        problems += await reference_problems(resource, lookup, policy)
    return deny_problems(source, problems) if problems else allow()


def _children_problems(name: str, existing: list[ClusterQueue]) -> Iterator[Problem]:
    children = sorted(cq.metadata.name for cq in existing if cq.spec.parent == name)
    if children:
        yield "(delete)", (
            f"ClusterQueue {name!r} is the parent of {_some(children)}; delete or re-parent "
            "its children first, so no subtree is left without its quota"
        )


def _parent_problems(queue: ClusterQueue, existing: list[ClusterQueue]) -> Iterator[Problem]:
    """An unknown parent, or a cycle through this queue; older breakage elsewhere is ignored."""
    name, parent = queue.metadata.name, queue.spec.parent
    if parent is None:
        return
    parents: dict[str, str | None] = {cq.metadata.name: cq.spec.parent for cq in existing}
    parents[name] = parent
    if parent not in parents:
        yield "spec.parent", (
            f"ClusterQueue {parent!r} does not exist; create the parent first, "
            "or remove spec.parent to make this a root"
        )
        return
    chain = [name]
    current: str | None = parent
    while current is not None and current not in chain:
        chain.append(current)
        current = parents.get(current)
    if current == name:
        yield "spec.parent", (
            f"{parent!r} would close the parent cycle {' -> '.join([*chain, name])}; "
            f"choose a parent that is not below {name!r}"
        )


def _leaf_problems(target: str, existing: list[ClusterQueue]) -> Iterator[Problem]:
    """Workloads are admitted into leaves only, so a LocalQueue must point at one."""
    children: dict[str, list[str]] = {cq.metadata.name: [] for cq in existing}
    for cq in existing:
        if cq.spec.parent in children:
            children[cq.spec.parent].append(cq.metadata.name)
    leaves = sorted(name for name, kids in children.items() if not kids)
    if target not in children:
        yield "spec.clusterQueue", (
            f"ClusterQueue {target!r} does not exist; name a leaf ClusterQueue "
            f"(existing leaves: {_some(leaves)})"
        )
    elif children[target]:
        below = sorted(children[target])
        yield "spec.clusterQueue", (
            f"ClusterQueue {target!r} is a parent queue (children: {', '.join(below)}); "
            f"name a leaf ClusterQueue instead (existing leaves: {_some(leaves)})"
        )


def _some(names: list[str], limit: int = NAMES_SHOWN) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names) - limit} more)" if len(names) > limit else "")


def _spec(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("spec") or {}
