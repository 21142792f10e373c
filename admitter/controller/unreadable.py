"""Objects the controller read but could not understand: each is skipped, told about on
itself (a Warning Event) and counted in a metric, and nothing else is held up by it.

Any tenant can create objects the API server accepts but admitter's translation cannot take
(a field of an unexpected type, an amount too large to count). One such object used to raise
through an informer or a pass and stop admission for the whole cluster; now it affects only
itself, and it is read again whenever it changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prometheus_client import Gauge

from admitter.api.workload import Reason
from admitter.kube.events import REPEAT_AFTER, EventRecorder
from admitter.kube.informer import Informer, Key, key_of
from admitter.kube.objects import Obj

UNREADABLE_ERRORS: tuple[type[Exception], ...] = (
    ValueError, KeyError, TypeError, AttributeError, IndexError, ArithmeticError,
)
"""What translating a malformed object raises; anything else is a bug and propagates."""


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    obj: Obj
    message: str


class Unreadable:
    """The objects skipped because they could not be understood, by kind and key."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, Key], Finding] = {}

    def add(self, kind: str, obj: Obj, error: Exception) -> None:
        message = f"admitter cannot read this {kind} and ignores it until it changes: " + (
            f"{type(error).__name__}: {error}")
        self.found[(kind, key_of(obj))] = Finding(kind, obj, message)

    def discard(self, kind: str, key: Key) -> None:
        self.found.pop((kind, key), None)

    def prune(self, current: Callable[[str, Key], Obj | None]) -> None:
        """Forget objects that are gone or changed since (`current`: the cache's version of
        an object of a kind, or None); a changed object is read again and found anew."""
        for (kind, key), finding in list(self.found.items()):
            now = current(kind, key)
            if now is None or now["metadata"].get("resourceVersion") != finding.obj[
                    "metadata"].get("resourceVersion"):
                del self.found[(kind, key)]

    def counts(self) -> Counter[str]:
        return Counter(kind for kind, _ in self.found)


    def report(self, stores: Mapping[str, Informer], gauge: Gauge, events: EventRecorder,
               now: float) -> None:
        """A Warning Event on every object skipped (at most once per REPEAT_AFTER each), and
        their number per kind of `stores` (each kind's cache) in `gauge`."""
        self.prune(lambda kind, key: stores[kind].get(*key))
        counts = self.counts()
        for kind in stores:
            gauge.labels(kind).set(counts.get(kind, 0))
        for finding in self.found.values():
            events.record(finding.obj, finding.kind, "Warning", Reason.UNREADABLE,
                          finding.message, now, REPEAT_AFTER)
