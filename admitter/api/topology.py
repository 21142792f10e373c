"""Topology: the physical hierarchy of the cluster as node label keys, coarsest first."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from admitter.api.base import ApiModel, Resource

HOSTNAME_LABEL = "kubernetes.io/hostname"


class TopologyLevel(ApiModel):
    """One level of the hierarchy, e.g. a rack."""

    node_label: str = Field(min_length=1)
    """Node label key whose value names the domain at this level."""


class TopologySpec(ApiModel):
    """Levels from the coarsest (block) to the finest (host)."""

    levels: list[TopologyLevel] = Field(min_length=1)
    """Ordered levels; each node label key may appear once."""

    @field_validator("levels")
    @classmethod
    def _unique(cls, levels: list[TopologyLevel]) -> list[TopologyLevel]:
        seen: set[str] = set()
        for level in levels:
            if level.node_label in seen:
                raise ValueError(f"node label {level.node_label!r} appears twice")
            seen.add(level.node_label)
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
