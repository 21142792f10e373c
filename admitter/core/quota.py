"""Who holds what, per queue and its ancestors, while a cycle admits and evicts.

Two ledgers: `funded` counts workloads with a min runtime (they are what fair share divides and,
without a usage window, what the ranking compares), `held` counts every admitted workload
(limits are hard caps on everything a queue holds, funded or not). Changes are plain additions,
so undoing one is applying the opposite change; within a cycle they go through the cycle's
`Statement` (`statement`), which logs them with the node model's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from admitter.core.fairshare import FairShare, ResourceShare
from admitter.core.model import GPU, UNLIMITED, Workload
from admitter.core.queue_tree import QueueTree

_NO_SHARE = ResourceShare(0, 0, 0)
_NOTHING: dict[str, int] = {}


class QuotaBlock:
    """Why a workload may not take more in a queue: which resource, how much, against what.
    A plain class with its own `__init__`: made for most workloads tried, and a dataclass's
    generated one runs interpreted (docs/admission-cycle.md, Speed)."""

    __slots__ = ("bound", "bound_name", "holding", "queue", "request", "resource")

    def __init__(self, queue: str, resource: str, holding: int, request: int, bound: int,
                 bound_name: str) -> None:
        self.queue = queue
        self.resource = resource
        self.holding = holding
        self.request = request
        self.bound = bound
        self.bound_name = bound_name

    def __repr__(self) -> str:
        return f"QuotaBlock({self.message()!r})"

    def __str__(self) -> str:
        return self.message()

    def message(self) -> str:
        return (
            f"queue {self.queue} holds {self.holding} {self.resource}; {self.request} more "
            f"would exceed its {self.bound_name} of {self.bound}"
        )

    @classmethod
    def read(cls, message: str) -> QuotaBlock | None:
        """The block a `message()` opens, as a waiting Workload's condition carries it (what
        `kubectl admitter explain` says would lift it); None for any other text."""
        found = _MESSAGE.match(message)
        if found is None:
            return None
        return cls(found["queue"], found["resource"], int(found["holding"]),
                   int(found["request"]), int(found["bound"]), found["bound_name"])


_MESSAGE = re.compile(r"queue (?P<queue>\S+) holds (?P<holding>-?\d+) (?P<resource>\S+); "
                      r"(?P<request>\d+) more would exceed its (?P<bound_name>.+?) of "
                      r"(?P<bound>-?\d+)")
"""`QuotaBlock.message`, read back."""


class Allocations:
    """What admitted workloads hold per queue, summed over each queue's subtree: `held` counts
    every one (limits cap it), `funded` those with a min runtime (fair share divides those).

    `IncrementalCore` keeps one between cycles, as it keeps the node model: it applies
    admissions, evictions and finishes with `add`/`remove`; a cycle changes it through its
    `Statement` and rolls back.
    """

    def __init__(self, tree: QueueTree, admitted: Iterable[Workload] = ()) -> None:
        self._paths = _layout(tree)[0]
        self.funded: dict[str, dict[str, int]] = {name: {} for name in tree}
        self.held: dict[str, dict[str, int]] = {name: {} for name in tree}
        self._keys: set[str] = set()
        self.changes = 0
        """How many changes so far: what was derived from the sums is stale once this moves."""
        own_held: dict[str, dict[str, int]] = {}
        own_funded: dict[str, dict[str, int]] = {}
        for workload in admitted:  # summed per leaf first (inlined), then along each path
            self._keys.add(workload.key)
            requests = workload.requests().items()
            for own in (own_held, own_funded) if workload.funded else (own_held,):
                sums = own.get(workload.queue)
                if sums is None:
                    sums = own[workload.queue] = {}
                for resource, amount in requests:
                    sums[resource] = sums.get(resource, 0) + amount
        for own, totals in ((own_held, self.held), (own_funded, self.funded)):
            for leaf, amounts in own.items():
                for name in self._paths[leaf]:
                    accumulate(totals[name], amounts, 1)

    def holds(self, key: str) -> bool:
        return key in self._keys

    def count(self) -> int:
        return len(self._keys)

    def remove(self, workload: Workload) -> None:
        self.add(workload, -1)

    def add(self, workload: Workload, sign: int = 1) -> None:
        """Count (sign 1) or stop counting (sign -1) what `workload` requests."""
        self.changes += 1
        if sign > 0:
            self._keys.add(workload.key)
        else:
            self._keys.discard(workload.key)
        requests = workload.requests().items()
        funded = workload.funded
        for name in self._paths[workload.queue]:
            held = self.held[name]
            for resource, amount in requests:
                held[resource] = held.get(resource, 0) + sign * amount
            if funded:
                held = self.funded[name]
                for resource, amount in requests:
                    held[resource] = held.get(resource, 0) + sign * amount


class QuotaLedger:
    """Allocation per queue (subtree sums) against its hard limits and the cycle's fair share,
    read live from the allocations as the cycle's `Statement` changes them."""

    def __init__(self, tree: QueueTree, fair: FairShare, allocations: Allocations) -> None:
        self._paths, self._limits = _layout(tree)
        self._allocations = allocations
        self.funded = allocations.funded
        self.held = allocations.held
        self._share_path = {
            leaf: [(name, fair.shares.get(name, {}), self.funded[name]) for name in path]
            for leaf, path in self._paths.items()
        }
        """Per leaf, root first: each queue's shares and live funded allocation, resolved once
        because `share_block` runs for every long non-preemptible workload tried."""

    def path(self, leaf: str) -> tuple[str, ...]:
        """Root first, ending with the leaf."""
        return self._paths[leaf]

    @property
    def changes(self) -> int:
        """How many changes the allocations have seen (`Allocations.changes`)."""
        return self._allocations.changes

    def limit_block(self, workload: Workload) -> QuotaBlock | None:
        """The first queue on the path whose hard limit the workload would break."""
        limits = self._limits[workload.queue]
        if not limits:
            return None
        requests = workload.requests()
        for name, resource, limit in limits:
            amount = requests.get(resource, 0)
            holding = self.held[name].get(resource, 0)
            if amount and holding + amount > limit:
                return QuotaBlock(name, resource, holding, amount, limit, "limit")
        return None

    def within_deserved(self, workload: Workload) -> bool:
        """Whether admitting `workload` keeps every queue on its path within its deserved GPUs
        (funded allocation counted, as fair share divides it). Such a start is the queue's
        guarantee: no reserve (the short jobs' room, a drain's hold) is ever taken out of it.
        Only GPUs: the reserves are made of GPUs, and a resource a queue does not budget never
        gates admission."""
        amount = workload.requests().get(GPU, 0)
        for _name, by_resource, funded in self._share_path[workload.queue]:
            if funded.get(GPU, 0) + amount > by_resource.get(GPU, _NO_SHARE).deserved:
                return False
        return True

    def share_block(self, workload: Workload) -> QuotaBlock | None:
        """The first queue on the path where the workload would pass its fair share, counting
        funded allocation only (long non-preemptible work stays within it)."""
        requests = workload.requests()
        for name, by_resource, funded in self._share_path[workload.queue]:
            for resource, amount in requests.items():
                bound = by_resource.get(resource, _NO_SHARE).fair_share
                holding = funded.get(resource, 0)
                if holding + amount > bound:
                    return QuotaBlock(name, resource, holding, amount, bound, "fair share")
        return None


@lru_cache(maxsize=8)
def _layout(tree: QueueTree) -> tuple[dict[str, tuple[str, ...]],
                                      dict[str, list[tuple[str, str, int]]]]:
    """Per leaf, its path and the hard limits on it: fixed for a tree, which a caller running
    cycle after cycle keeps."""
    paths = {leaf: tree.path(leaf) for leaf in tree.leaves()}
    limits = {
        leaf: [(name, resource, knobs.limit)
               for name in path
               for resource, knobs in sorted(tree.queue(name).resources.items())
               if knobs.limit != UNLIMITED]
        for leaf, path in paths.items()
    }
    return paths, limits


def accumulate(target: dict[str, int], amounts: dict[str, int], sign: int) -> None:
    for resource, amount in amounts.items():
        target[resource] = target.get(resource, 0) + sign * amount
