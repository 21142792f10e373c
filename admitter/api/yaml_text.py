"""YAML that the API server's reader takes back exactly as written.

kubectl, helm and the API server read YAML with a Go reader that follows YAML 1.1 more widely
than PyYAML's writer expects: PyYAML leaves `1e5`, `1.5e+3`, `0o17`, `y` and `n` unquoted, and
the Go reader turns them into a number or a boolean. A label value such as `1e5` in a
namespace selector then makes the whole object unreadable ("cannot unmarshal number into Go
struct field ... of type string"). This writer quotes every string the Go reader would read as
anything but a string."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import yaml


class _GoSafeDumper(yaml.SafeDumper):
    """A safe dumper whose resolver also knows the Go reader's other scalars; PyYAML quotes a
    string whenever its resolver would read the string back as another type."""


# Go's YAML reader: a float is any decimal with an optional exponent of optional sign.
_GoSafeDumper.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?$"),
    list("-+.0123456789"))
# Go parses integers with base prefixes, including octal's `0o`.
_GoSafeDumper.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?0[oO][0-7_]+$"), list("-+0"))
# YAML 1.1's one-letter booleans.
_GoSafeDumper.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))


def dump(data: Any, *, sort_keys: bool = True, width: int | None = None) -> str:
    """One YAML document."""
    return yaml.dump(data, Dumper=_GoSafeDumper, sort_keys=sort_keys, width=width)


def dump_all(documents: Iterable[Any], *, sort_keys: bool = True) -> str:
    """YAML documents separated by `---`."""
    return yaml.dump_all(documents, Dumper=_GoSafeDumper, sort_keys=sort_keys)
