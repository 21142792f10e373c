"""Workload rules beyond the model: its references, and a frozen spec while it holds quota.

The controller creates a Workload only for a Job the Job webhook admitted, and the LocalQueue
may be gone by then: its Workloads skip the reference checks (the controller reports a missing
queue on the Workload itself), but anyone else's Workload must name what exists.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from admitter.api.convert import cluster_levels
from admitter.api.duration import format_duration
from admitter.api.topology import Topology
from admitter.api.workload import Workload
from admitter.core.model import is_funded
from admitter.webhook.jobs import JobPolicy, bounds
from admitter.webhook.lookup import Lookup

Problem = tuple[str, str]


async def reference_problems(
    workload: Workload, lookup: Lookup, policy: JobPolicy
) -> list[Problem]:
    """Unknown LocalQueue, a min runtime above its queue's cap or a maximum run time above its
    ceiling, topology levels no Topology has."""
    spec, namespace = workload.spec, workload.metadata.namespace or ""
    problems: list[Problem] = []
    local_queues = {lq.metadata.name: lq for lq in await lookup.local_queues(namespace, True)}
    local_queue = local_queues.get(spec.queue_name)
    if local_queue is None:
        existing = ", ".join(sorted(local_queues)) or "none"
        problems.append(("spec.queueName", (
            f"LocalQueue {spec.queue_name!r} does not exist in namespace {namespace!r} "
            f"(existing: {existing})"
        )))
    elif is_funded(spec.min_runtime) or spec.max_runtime is not None:
        leaf = local_queue.spec.cluster_queue
        cap, ceiling = bounds(await lookup.cluster_queues(), leaf, policy)
        if spec.min_runtime > cap:
            problems.append(("spec.minRuntime", (
                f"{format_duration(spec.min_runtime)} is above maxMinRuntime "
                f"{format_duration(cap)} of ClusterQueue {leaf!r}"
            )))
        if spec.max_runtime is not None and ceiling is not None and spec.max_runtime > ceiling:
            problems.append(("spec.maxRuntime", (
                f"{format_duration(spec.max_runtime)} is above maxRuntimeCeiling "
                f"{format_duration(ceiling)} of ClusterQueue {leaf!r}"
            )))
    if spec.topology is not None:
        problems += _topology_problems(
            spec.topology.required, spec.topology.preferred, await lookup.topologies()
        )
    return problems


def _topology_problems(
    required: str | None, preferred: str | None, topologies: list[Topology]
) -> Iterator[Problem]:
    """Levels of the one Topology the controller places by (`cluster_levels`)."""
    levels = list(cluster_levels({t.metadata.name: t.spec.label_keys() for t in topologies})
                  or ())
    for strength, level in (("required", required), ("preferred", preferred)):
        if level is not None and level not in levels:
            yield f"spec.topology.{strength}", (
                f"{level!r} is not a level of the cluster's Topology "
                f"(levels: {', '.join(levels) or 'none'})"
            )
    if (required in levels and preferred in levels
            and levels.index(preferred) < levels.index(required)):
        yield "spec.topology.preferred", (
            f"{preferred!r} is coarser than required {required!r}; the preferred level "
            "must be the same or finer"
        )


def frozen_spec_problems(new: dict[str, Any], old: dict[str, Any]) -> Iterator[Problem]:
    """An admitted Workload's spec is what its quota was charged for; changing it would let the
    Job run more than was charged."""
    if not (old.get("status") or {}).get("admission"):
        return
    before, after = old.get("spec") or {}, new.get("spec") or {}
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            yield f"spec.{key}", (
                "cannot change while the Workload holds quota (status.admission is set); "
                "it is charged for what it had when admitted"
            )
