"""Shared building blocks of the API: camelCase models that reject unknown keys, conditions,
object metadata and the resource-name rule."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

from admitter.api.quantity import Quantity, format_quantity, to_base_units

GROUP = "admitter.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

_QUALIFIED_NAME_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
"""Kubernetes' qualified name, the form of label keys and resource names: an optional
DNS-subdomain prefix and `/`, then at most 63 letters, digits, `-`, `_`, `.`."""
_QUALIFIED_NAME = re.compile(_QUALIFIED_NAME_PATTERN)
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_MAX = 253 + 1 + 63


def _is_qualified_name(name: str) -> bool:
    # fullmatch: `$` alone would let a trailing newline through.
    prefix = name.rpartition("/")[0]
    return len(prefix) <= 253 and _QUALIFIED_NAME.fullmatch(name) is not None


def check_resource_name(name: str) -> str:
    if not _is_qualified_name(name):
        raise ValueError(
            f"{name[:_QUALIFIED_MAX]!r} is not a resource name (e.g. nvidia.com/gpu, cpu, memory)"
        )
    return name


def check_object_name(name: str) -> str:
    if len(name) > 253 or not _DNS_NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a valid name: lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return name


def check_label_key(key: str) -> str:
    """A Kubernetes label key, e.g. `topology.kubernetes.io/zone`."""
    if not _is_qualified_name(key):
        raise ValueError(
            f"{key[:_QUALIFIED_MAX]!r} is not a label key: an optional DNS-subdomain prefix (at "
            "most 253 characters) and '/', then at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit (e.g. topology.kubernetes.io/zone)"
        )
    return key


def check_amount(resource: str, amount: Decimal) -> Decimal:
    """An amount the core can count: cpu to the millicore, every other resource in whole
    units (`nvidia.com/gpu` is an extended resource: whole GPUs only)."""
    try:
        to_base_units(resource, amount)
    except ValueError as error:
        raise ValueError(f"{error}; only cpu may be fractional (e.g. 500m)") from None
    return amount


def check_requests(amounts: dict[str, Decimal]) -> dict[str, Decimal]:
    for resource, amount in amounts.items():
        if amount < 0:
            raise ValueError(f"{resource} must not be negative, got {format_quantity(amount)}")
        check_amount(resource, amount)
    return amounts


ResourceName = Annotated[str, AfterValidator(check_resource_name)]
ObjectName = Annotated[str, AfterValidator(check_object_name)]
LabelKey = Annotated[
    str,
    AfterValidator(check_label_key),
    WithJsonSchema({"type": "string", "maxLength": _QUALIFIED_MAX,
                    "pattern": _QUALIFIED_NAME_PATTERN}),
]
ResourceList = Annotated[dict[ResourceName, Quantity], AfterValidator(check_requests)]
"""Amounts per resource, e.g. `{nvidia.com/gpu: 8, cpu: 96, memory: 1Ti}`: not negative,
whole except cpu."""
PRIORITY_MIN, PRIORITY_MAX = -(2**31), 2**31 - 1
"""Priorities are int32, as in a Kubernetes PriorityClass."""
Priority = Annotated[int, Field(ge=PRIORITY_MIN, le=PRIORITY_MAX)]
MAX_OVER_QUOTA_WEIGHT = 1e6
"""Weights only split surplus between siblings: a million to one is already all-or-nothing,
and fair share multiplies and sums weights, which must stay finite (1e308 overflowed)."""
MAX_K_VALUE = 1000.0
"""kValue scales usage against weights in fair share: beyond a thousand, usage alone decides,
and the products must stay finite."""


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

