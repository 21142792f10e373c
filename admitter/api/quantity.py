"""Kubernetes resource quantities (`500m`, `64Gi`, `8`) parsed exactly and printed canonically.

Values are kept as `Decimal` so that `1.5Gi` or `0.1` never pick up binary floating-point
noise; the decision core receives integers in base units through `to_base_units`.
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_BINARY = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")
_DECIMAL = ("E", "P", "T", "G", "M", "k")
QUANTITY_PATTERN = (
    r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
)
_PATTERN = re.compile(QUANTITY_PATTERN)
MILLI = Decimal("0.001")
MAX_QUANTITY = Decimal(2) ** 60
"""1Ei, the largest amount admitter accepts of any resource. Kubernetes keeps a quantity in an
int64 of its base unit (at most ~8Ei); 1Ei is far above any cluster (an exbibyte of memory)
and leaves room to sum amounts over a queue tree and in millicores without losing digits."""

_KUBE_MAX = Decimal(2) ** 63 / 1000
"""Kubernetes keeps a quantity's milli-value in an int64; larger ones cannot be counted."""


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Decimal:
    """A quantity string's amount; cached because the controller reads the same few strings
    (every node's allocatable, every pod's requests) on every pass."""
    match = _PATTERN.match(value.strip())
    if not match:
        raise ValueError(f"{value!r} is not a quantity (expected e.g. 8, 500m, 64Gi)")
    try:
        return Decimal(match.group(1)) * _SUFFIXES[match.group(2) or ""]
    except ArithmeticError as exc:  # InvalidOperation, and Overflow for 1e99999999999
        raise ValueError(f"{value!r} is not a quantity") from exc


def parse_quantity(value: Any) -> Decimal:
    """Parse a YAML scalar as a quantity; raise ValueError quoting the bad value."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity (expected e.g. 8, 500m, 64Gi)")
    if isinstance(value, Decimal):
        amount = value
    elif isinstance(value, int):
        amount = Decimal(value)
    elif isinstance(value, float):
        amount = Decimal(repr(value))
    elif isinstance(value, str):
        amount = _parse_text(value)
    else:
        raise ValueError(f"{value!r} is not a quantity (expected e.g. 8, 500m, 64Gi)")
    if not amount.is_finite() or abs(amount) > MAX_QUANTITY:
        raise ValueError(f"{value!r} is out of range: admitter accepts quantities up to 1Ei")
    if amount != amount.quantize(MILLI, rounding="ROUND_CEILING"):
        raise ValueError(f"{value!r} is more precise than 1m, the finest unit admitter keeps")
    return amount.normalize() if amount != 0 else Decimal(0)


def format_quantity(amount: Decimal) -> int | str:
    """Canonical form: an int when whole and small, else the largest exact suffix."""
    if amount == amount.to_integral_value():
        whole = int(amount)
        if whole != 0:
            for suffix in _BINARY:
                unit = int(_SUFFIXES[suffix])
                if whole % unit == 0:
                    return f"{whole // unit}{suffix}"
            if abs(whole) >= 1000:
                for suffix in _DECIMAL:
                    unit = int(_SUFFIXES[suffix])
                    if whole % unit == 0:
                        return f"{whole // unit}{suffix}"
        return whole
    return f"{int(amount * 1000)}m"


def to_base_units(resource: str, amount: Decimal) -> int:
    """Integer base units for the core: millicores for cpu, whole units for everything else."""
    if resource == "cpu":
        return int(amount * 1000)
    if amount != amount.to_integral_value():
        raise ValueError(f"{resource} must be a whole number, got {format_quantity(amount)}")
    return int(amount)


def kube_base_units(resource: str, value: Any) -> int:
    """Integer base units of a quantity read from the API server, rounded up as Kubernetes
    rounds it (`Quantity.Value()`/`MilliValue()`, what kube-scheduler counts): a memory
    request of `500m` is 1 byte, a cpu request of `0.0001` is 1 millicore. Only what the API
    server itself would refuse raises ValueError; objects it accepted are never refused for
    being more precise than admitter's own notation (`parse_quantity` keeps that for user
    input)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        raise ValueError(f"{value!r} is not a quantity (expected e.g. 8, 500m, 64Gi)")
    if isinstance(value, str):
        amount = _parse_text(value)
    else:
        amount = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not amount.is_finite() or abs(amount) >= _KUBE_MAX:
        raise ValueError(f"{value!r} is not a quantity of at most 2^63-1 base units")
    scaled = amount * 1000 if resource == "cpu" else amount
    return int(scaled.to_integral_value(rounding="ROUND_CEILING"))


def from_base_units(resource: str, amount: int) -> Decimal:
    """Inverse of `to_base_units`."""
    return Decimal(amount) / 1000 if resource == "cpu" else Decimal(amount)


Quantity = Annotated[
    Decimal,
    BeforeValidator(parse_quantity),
    PlainSerializer(format_quantity, return_type=int | str),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
"""A quantity field: accepts Kubernetes notation, serialises canonically."""
