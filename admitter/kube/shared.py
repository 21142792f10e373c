"""Equal parts of cached objects kept once.

A hundred thousand waiting jobs and their Workloads mostly repeat a few shapes: the same
labels, the same pod spec, the same Workload spec, the same pending status. A dict costs
hundreds of bytes however small, so a cache keeps one of each equal part and the objects
share it. Cached objects are never modified in place (every writer builds a new object or a
patch), which is what makes sharing safe."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from admitter.kube.objects import Obj

SHARED_PARTS = 4096
"""Distinct values a table keeps: the least recently met goes first, so it stays small
whatever the cluster runs and keeps the shapes met often."""
Path = tuple[str, ...]


class SharedParts:
    """One table of equal values, for one kind of part (parts of one path: a part that is
    unique to each object, met once, does not push the shared ones out of another's
    table)."""

    def __init__(self, limit: int = SHARED_PARTS) -> None:
        self.limit = limit
        self._kept: dict[str, Any] = {}

    def __call__(self, value: Any) -> Any:
        """The value kept equal to `value`, or `value`, kept from now on."""
        if not isinstance(value, dict | list) or not value:
            return value
        key = json.dumps(value, sort_keys=True, separators=(",", ":"))
        found = self._kept.pop(key, None)
        if found is None:
            found = value
            if len(self._kept) >= self.limit:
                del self._kept[next(iter(self._kept))]
        self._kept[key] = found  # the most recently met last
        return found

    def __len__(self) -> int:
        return len(self._kept)


class Sharing:
    """Shares the parts of an object at fixed paths, a table per path: what an informer
    keeps (`Informer.keep`)."""

    def __init__(self, *paths: Path) -> None:
        self.tables = {path: SharedParts() for path in paths}

    def __call__(self, obj: Obj) -> Obj:
        for path, table in self.tables.items():
            obj = share_at(obj, path, table)
        return obj


def share_at(obj: Obj, path: Path, share: Callable[[Any], Any]) -> Obj:
    """`obj` with the part at `path` replaced by `share(part)`: a new object if that gave
    another value (only the dicts on the path copied), else `obj` itself; `obj` is not
    changed, nor is anything when the path is not there."""
    part: Any = obj
    for step in path:
        if isinstance(part, list) and step.isdigit() and int(step) < len(part):
            part = part[int(step)]
        elif isinstance(part, dict) and step in part:
            part = part[step]
        else:
            return obj
    value = share(part)
    return obj if value is part else replaced(obj, path, value)


def replaced(obj: Any, path: Sequence[str], value: Any) -> Any:
    """A copy of `obj` with `value` at `path` (dict keys, list indexes as digits): only the
    dicts and lists on the path are copied, everything else is shared with `obj`."""
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(obj, list):
        copied = list(obj)
        copied[int(step)] = replaced(obj[int(step)], rest, value)
        return copied
    return {**obj, step: replaced(obj[step], rest, value)}
