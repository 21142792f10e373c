"""Topology: the physical hierarchy of the cluster as node label keys, coarsest first."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from admitter.api.base import ApiModel, LabelKey, Resource
from admitter.core.topology import HOSTNAME as HOSTNAME_LABEL

WIDEST_FIRST = ("topology.kubernetes.io/region", "topology.kubernetes.io/zone", HOSTNAME_LABEL)
"""Well-known label keys, widest first: among these the order is known, so it is checked.
The host is the narrowest domain of all, so it can only be the last level."""
MAX_LEVELS = 16
"""Far more levels than any data centre has (block, rack, host); bounds placement searches."""


class TopologyLevel(ApiModel):
    """One level of the hierarchy, e.g. a rack."""

    node_label: LabelKey
    """Node label key whose value names the domain at this level."""


class TopologySpec(ApiModel):
    """Levels from the coarsest (block) to the finest (host)."""

    levels: list[TopologyLevel] = Field(min_length=1, max_length=MAX_LEVELS)
    """Ordered levels; each node label key may appear once."""

    @field_validator("levels")
    @classmethod
    def _unique(cls, levels: list[TopologyLevel]) -> list[TopologyLevel]:
        seen: set[str] = set()
        for level in levels:
            if level.node_label in seen:
                raise ValueError(f"node label {level.node_label!r} appears twice")
            seen.add(level.node_label)
        known = [key for key in seen if key in WIDEST_FIRST]
        keys = [level.node_label for level in levels]
        in_order = sorted(known, key=WIDEST_FIRST.index)
        if [key for key in keys if key in WIDEST_FIRST] != in_order:
            raise ValueError(
                "levels go from the widest domain to the narrowest: list "
                + ", ".join(in_order) + " in that order"
            )
        if HOSTNAME_LABEL in seen and keys[-1] != HOSTNAME_LABEL:
            raise ValueError(
                f"{HOSTNAME_LABEL} is the narrowest level (one node) and can only be the last; "
                f"move it after {keys[-1]!r}"
            )
        return levels

    def label_keys(self) -> list[str]:
        return [level.node_label for level in self.levels]


class Topology(Resource):
    """Workloads name one of these levels as their required or preferred placement."""

    kind_name: ClassVar[str] = "Topology"
    plural: ClassVar[str] = "topologies"
    short_names: ClassVar[tuple[str, ...]] = ("topo",)
    namespaced: ClassVar[bool] = False

    kind: Literal["Topology"] = "Topology"
    """Always `Topology`."""
    spec: TopologySpec
    """The levels."""
