"""Equal parts of cached objects kept once.

A hundred thousand waiting jobs and their Workloads mostly repeat a few shapes: the same
labels, the same pod spec, the same Workload spec, the same pending status. A dict costs
hundreds of bytes however small, so a cache keeps one of each equal part and the objects
share it. Cached objects are never modified in place (every writer builds a new object or a
patch), which is what makes sharing safe."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from admitter.kube.objects import Obj

SHARED_PARTS = 4096
"""Distinct values a table keeps: the least recently met goes first, so it stays small
whatever the cluster runs and keeps the shapes met often."""
Path = tuple[str, ...]
_MISSING = object()
DROP: Any = object()
"""What a `share` given to `share_at` returns to take the part out."""


class SharedParts:
    """One table of equal values, for one kind of part (parts of one path: a part that is
    unique to each object, met once, does not push the shared ones out of another's
    table)."""

    def __init__(self, limit: int = SHARED_PARTS) -> None:
        self.limit = limit
        self._kept: dict[str, Any] = {}

    def __call__(self, value: Any) -> Any:
        """The value kept equal to `value`, or `value`, kept from now on."""
        if not isinstance(value, dict | list):
            return value
        # equal reprs: equal JSON values (the same keys in the same order)
        return self.kept(repr(value), lambda: value)

    def kept(self, key: str, make: Callable[[], Any]) -> Any:
        """The value kept under `key`, or the one `make` makes, kept from now on."""
        found = self._kept.pop(key, _MISSING)
        if found is _MISSING:
            found = make()
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
        rebuilt = Rebuilt(obj)
        for path, table in self.tables.items():
            rebuilt.share(path, table)
        return rebuilt.root


class Rebuilt:
    """An object with some parts replaced, built without changing the object given: the
    dicts and lists on the paths to the parts replaced are copied, each once, and everything
    else is shared with the object given."""

    def __init__(self, obj: Obj) -> None:
        self.root = obj
        self._copies: set[int] = set()
        """The containers made here, changed in place from then on."""

    def share(self, path: Path, share: Callable[[Any], Any]) -> None:
        """The part at `path` replaced by `share(part)`, or taken out if that is DROP; nothing
        changes when the path is not there or `share` gives the part itself."""
        part: Any = self.root
        for step in path:
            if isinstance(part, list) and step.isdigit() and int(step) < len(part):
                part = part[int(step)]
            elif isinstance(part, dict) and step in part:
                part = part[step]
            else:
                return
        value = share(part)
        if value is part or not path:
            return
        self.root = self._copied(self.root)
        node: Any = self.root
        for step in path[:-1]:
            key: Any = int(step) if isinstance(node, list) else step
            child = self._copied(node[key])
            node[key] = child
            node = child
        last: Any = int(path[-1]) if isinstance(node, list) else path[-1]
        if value is DROP:
            del node[last]
        else:
            node[last] = value

    def _copied(self, container: Any) -> Any:
        if id(container) in self._copies:
            return container
        made = list(container) if isinstance(container, list) else dict(container)
        self._copies.add(id(made))
        return made


def share_at(obj: Obj, path: Path, share: Callable[[Any], Any]) -> Obj:
    """`obj` with the part at `path` replaced by `share(part)` (`Rebuilt.share`): a new
    object if that changed anything, else `obj` itself, which is not changed."""
    rebuilt = Rebuilt(obj)
    rebuilt.share(path, share)
    return rebuilt.root
