"""WorkerCluster: one cluster of a fleet, whose nodes the manager admits onto and where it
creates the jobs it admits there. Its name is the value of the node label
`admitter.dev/cluster` its nodes carry in the manager's model, so it must be a label value."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from admitter.api.base import (
    ApiModel,
    Condition,
    ObjectMeta,
    ObjectName,
    Resource,
    check_label_key,
)
from admitter.api.duration import Duration
from admitter.api.settings import check_label_value

CONDITION_REACHABLE = "Reachable"
"""Whether the manager reads the worker's nodes and pods and can create jobs there."""
CONDITION_KINDS_SERVED = "KindsServed"
"""On a reachable worker: whether it serves every kind the manager copies there (the JobSet
and RayJob CRDs); False names the kinds it lacks, whose jobs are not placed there."""
DEFAULT_SECRET_KEY = "kubeconfig"
_CLUSTER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class SecretKeyReference(ApiModel):
    """A key of a Secret in admitter's own namespace: never a file path, so a WorkerCluster's
    author cannot make the controller read its own files (or another namespace's secrets)."""

    name: ObjectName
    """The Secret's name, in the namespace admitter runs in."""
    key: str = Field(default=DEFAULT_SECRET_KEY, min_length=1, max_length=253,
                     pattern=r"^[-._a-zA-Z0-9]+$")
    """The key whose value is a kubeconfig for the worker (one context, credentials inline)."""


DEFAULT_LOST_GRACE_PERIOD = 300.0
"""Five minutes: a worker API server's restart or a short network cut passes well within it,
and the jobs it ran keep their quota meanwhile."""


class WorkerClusterSpec(ApiModel):
    """Where the worker is and how it is described."""

    kubeconfig: SecretKeyReference
    """The Secret key holding the kubeconfig the manager uses to reach the worker."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels every node of the worker carries in the manager's model (e.g.
    `topology.kubernetes.io/region: us-west`, `example.com/cost: on-demand`), beside
    `admitter.dev/cluster: <name>`, which they may not set."""

    lost_grace_period: Duration = DEFAULT_LOST_GRACE_PERIOD
    """How long the worker may not answer before the Workloads admitted onto it are requeued
    (and may be placed in another worker), e.g. `5m`, the default. Their copies in it may
    still run meanwhile; they are deleted when it answers again, before anything new is
    admitted there."""

    @field_validator("labels")
    @classmethod
    def _node_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for key, value in labels.items():
            check_label_key(key)
            try:
                check_label_value(value)
            except ValueError as error:
                raise ValueError(f"{key[:80]!r}: {error}") from None
        if "admitter.dev/cluster" in labels:
            raise ValueError("admitter.dev/cluster is the WorkerCluster's name; do not set it "
                             f"(got {labels['admitter.dev/cluster']!r})")
        return labels


class WorkerClusterStatus(ApiModel):
    """What the manager last saw of the worker."""

    conditions: list[Condition] = Field(default_factory=list)
    """`Reachable`: True once the worker's nodes and pods are read; False with the reason
    (InvalidSpec, SecretNotFound, SecretKeyMissing, SecretUnreadable, InvalidKubeconfig,
    Unreachable, Forbidden, Syncing) and the error. `KindsServed` (while reachable): True
    when every kind the manager copies is served; False, `CRDMissing`, naming the kinds whose
    CRD the worker lacks: their jobs are not placed there."""
    last_error: str = ""
    """The last error met reaching the worker, kept after it recovers."""
    nodes: int = 0
    """Nodes the worker offers the fleet."""
    gpus: int = 0
    """`nvidia.com/gpu` allocatable over those nodes."""


class WorkerCluster(Resource):
    """A worker of the fleet; cluster-scoped, written by the fleet's admins."""

    kind_name: ClassVar[str] = "WorkerCluster"
    plural: ClassVar[str] = "workerclusters"
    short_names: ClassVar[tuple[str, ...]] = ("wc",)
    namespaced: ClassVar[bool] = False

    kind: Literal["WorkerCluster"] = "WorkerCluster"
    """Always `WorkerCluster`."""
    spec: WorkerClusterSpec
    """Desired state."""
    status: WorkerClusterStatus | None = None
    """Observed state, written by the controller."""

    @field_validator("metadata")
    @classmethod
    def _name_is_a_cluster_label_value(cls, metadata: ObjectMeta) -> ObjectMeta:
        check_cluster_name(metadata.name)
        return metadata


def check_cluster_name(name: str) -> str:
    """A WorkerCluster's name becomes a node label value: at most 63 lowercase letters,
    digits and '-'."""
    if not _CLUSTER_NAME.fullmatch(name):
        raise ValueError(f"name {name[:80]!r} is not a cluster name: at most 63 "
                         "lowercase letters, digits and '-', starting and ending with a "
                         "letter or digit (it becomes the admitter.dev/cluster node label)")
    return name
