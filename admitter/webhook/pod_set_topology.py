"""A pod template's own topology annotations (a JobSet's replicated job kept in one rack) are
checked as a job's are: each names a level of the cluster's Topology."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from admitter.api.contract import (
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    ContractError,
    parse_topology,
)
from admitter.api.convert import cluster_levels
from admitter.jobs.interface import PodSetInfo, dotted
from admitter.webhook.lookup import Lookup

Asks = list[tuple[tuple[str, ...], Mapping[str, str]]]


def _asking(pod_sets: Sequence[PodSetInfo] | None) -> Asks:
    """(pod spec path, template annotations) of each pod set asking for a topology."""
    return [(p.path, p.annotations) for p in pod_sets or ()
            if TOPOLOGY_REQUIRED_ANNOTATION in p.annotations
            or TOPOLOGY_PREFERRED_ANNOTATION in p.annotations]


async def pod_set_topology_problems(new: Sequence[PodSetInfo] | None,
                                    old: Sequence[PodSetInfo] | None,
                                    lookup: Lookup) -> list[tuple[str, str]]:
    """(field, problem) per pod template whose topology annotations name no level; checked
    when they are new or changed (`old` is None on create), reading Topologies only then."""
    asking = _asking(new)
    if not asking or (old is not None and asking == _asking(old)):
        return []
    levels = cluster_levels({t.metadata.name: t.spec.label_keys()
                             for t in await lookup.topologies()})
    problems = []
    for path, found in asking:
        try:
            parse_topology(found, None if levels is None else list(levels))
        except ContractError as error:
            problems.append((dotted((*path[:-1], "metadata", "annotations")), str(error)))
    return problems
