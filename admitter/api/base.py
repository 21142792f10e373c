"""Shared building blocks of the API: camelCase models that reject unknown keys, conditions,
object metadata and the resource-name rule."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from admitter.api.quantity import Quantity

GROUP = "admitter.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

_RESOURCE_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def check_resource_name(name: str) -> str:
    if len(name) > 253 or not _RESOURCE_NAME.match(name):
        raise ValueError(f"{name!r} is not a resource name (e.g. nvidia.com/gpu, cpu, memory)")
    return name


def check_object_name(name: str) -> str:
    if len(name) > 253 or not _DNS_NAME.match(name):
        raise ValueError(
            f"{name!r} is not a valid name: lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return name


ResourceName = Annotated[str, AfterValidator(check_resource_name)]
ObjectName = Annotated[str, AfterValidator(check_object_name)]
ResourceList = dict[ResourceName, Quantity]
"""Amounts per resource, e.g. `{nvidia.com/gpu: 8, cpu: 96, memory: 1Ti}`."""


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python, unknown keys are errors."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=True,
        validate_default=True,
    )


class Condition(ApiModel):
    """A Kubernetes-style condition: the latest observation of one aspect of the object."""

    type: str
    """CamelCase condition type, e.g. `Admitted`."""
    status: Literal["True", "False", "Unknown"]
    """Whether the condition holds."""
    reason: str = ""
    """One CamelCase word a program can switch on, e.g. `Preempted`."""
    message: str = ""
    """A sentence for people that says why."""
    last_transition_time: datetime | None = None
    """When `status` last changed."""
    observed_generation: int | None = None
    """The `metadata.generation` this condition was computed from."""


class ObjectMeta(ApiModel):
    """The subset of Kubernetes object metadata admitter reads; the rest passes through."""

    model_config = ConfigDict(extra="allow")

    name: ObjectName
    """Object name."""
    namespace: str | None = None
    """Namespace of namespaced kinds."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations."""
    creation_timestamp: datetime | None = None
    """Set by the API server; orders queues created at the same level."""
    deletion_timestamp: datetime | None = None
    """Set by the API server once deletion was asked for; finalizers may still hold it."""


class Resource(ApiModel):
    """Base of the top-level kinds: apiVersion, kind, metadata."""

    kind_name: ClassVar[str]
    plural: ClassVar[str]
    short_names: ClassVar[tuple[str, ...]] = ()
    namespaced: ClassVar[bool]

    api_version: Literal["admitter.dev/v1alpha1"] = "admitter.dev/v1alpha1"
    """Always `admitter.dev/v1alpha1`."""
    kind: str
    """The kind's name."""
    metadata: ObjectMeta
    """Standard object metadata."""


def non_negative(amount: Decimal) -> Decimal:
    if amount < 0:
        raise ValueError(f"must not be negative, got {amount}")
    return amount
