"""How each allocation's funded GPU time compares with its budget: the order in which pending
work is offered capacity, and whose running work may be requeued for whose (Ai2's "ranks
workloads from underused allocations ahead of workloads from overused allocations").

Budget. A queue's budget is its part of its parent's GPUs when every queue wants all it can
get: its deserved GPU quota first, then its GPU over-quota weight's part of what the siblings'
quotas leave (KAI's division with unbounded demand); the roots divide the schedulable GPUs.
Only GPUs are budgeted: CPU and memory limit placement and explicit limits, never the rank.

Use. With time-based fair share on, a queue's use is the funded GPU-seconds its subtree held
inside the lookback window (the records include the runs still going on); with it off, the
funded GPUs its subtree holds right now. `ratio = use / budget`; a queue with no budget ranks
after every queue with one.

Order. Siblings are compared on their ratio, level by level down the tree: two leaves are
compared where their paths diverge. An allocation is *clearly worse* than another when its
ratio exceeds the other's by more than a margin, `(1 + margin)` times; only then may its
running work (past its min runtime) be requeued for the other's pending work. The margin is the
hysteresis of time-slicing: right after a swap the two are ranked as before (use over a window
moves only with time), so nobody takes the GPUs back until the used GPU time has moved by the
margin, and then only because demand or use changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from admitter.core.model import GPU, UNLIMITED
from admitter.core.queue_tree import QueueTree


@lru_cache(maxsize=8)
def gpu_budgets(tree: QueueTree, gpus: int) -> dict[str, float]:
    """Every queue's GPU budget (see the module docstring): deserved quota, then the over-quota
    weight's part of what is left, down from the `gpus` the cluster can schedule. Fixed for a
    tree (immutable) and a GPU count, which a caller running cycle after cycle keeps, so worked
    out once for them (as fair share's layout is): the answer is shared, never change it."""
    budgets: dict[str, float] = {}
    for parent, siblings in tree.sibling_groups():
        amount = float(gpus) if parent is None else budgets.get(parent, 0.0)
        knobs = [tree.queue(name).knobs(GPU) for name in siblings]
        quotas = [amount if k.quota == UNLIMITED else min(float(k.quota), amount)
                  for k in knobs]
        left = max(0.0, amount - sum(quotas))
        weights = sum(max(k.over_quota_weight, 0.0) for k in knobs)
        for name, quota, k in zip(siblings, quotas, knobs, strict=True):
            extra = left * max(k.over_quota_weight, 0.0) / weights if weights > 0 else 0.0
            budgets[name] = quota + extra
    return budgets


class Ranking:
    """The ratios of one cycle. `used` maps every queue to its windowed GPU-seconds (subtree
    sums) when time-based fair share is on, and is None when it is off: then `held` (the
    ledger's live funded allocation per queue, subtree sums) is the use, and ratios move with
    every admission and eviction of the cycle."""

    def __init__(self, tree: QueueTree, budgets: dict[str, float], used: dict[str, float] | None,
                 held: dict[str, dict[str, int]]) -> None:
        self._tree = tree
        self._budgets = budgets
        self._used = used
        self._held = held
        self.by_holding = used is None
        """Use is what is held now: ratios move with every admission and eviction."""
        self._diverging: dict[tuple[str, str], tuple[str, str]] = {}
        self._ratios: dict[str, float] = {}
        self._paths: dict[str, tuple[str, ...]] = {}

    def key(self, queue: str) -> tuple[bool, float, float]:
        """Sort key among siblings, smaller first: budgeted first, lower ratio, then (with use
        over a window) lower share of budget held right now."""
        budget = self._budgets.get(queue, 0.0)
        held = float(self._held[queue].get(GPU, 0))
        if budget <= 0:
            return True, held, 0.0
        return False, self._use(queue, 0) / budget, held / budget

    def budget(self, queue: str) -> float:
        """The queue's GPU budget (`gpu_budgets`)."""
        return self._budgets.get(queue, 0.0)

    def sibling_ranks(self) -> dict[str, int]:
        """Every queue's place among its siblings in the order they are offered capacity
        (1 = first), by `key`: what `kubectl admitter queues` shows as the rank."""
        ranks: dict[str, int] = {}
        for _, siblings in self._tree.sibling_groups():
            for place, name in enumerate(sorted(siblings, key=lambda n: (self.key(n), n)), 1):
                ranks[name] = place
        return ranks

    def ratio(self, queue: str, extra: int = 0) -> float:
        """Use / budget, with `extra` GPUs more held (counted only when use is what is held).
        With use over a window the ratios are fixed for the cycle, so they are kept."""
        if self._used is not None:
            known = self._ratios.get(queue)
            if known is None:
                known = self._ratios[queue] = self._ratio(queue, 0)
            return known
        return self._ratio(queue, extra)

    def after_run(self, queue: str, gpus: int, seconds: float) -> float:
        """`queue`'s ratio once `gpus` GPUs more have run for `seconds`: with use over a window,
        that GPU time charged; with use held now, those GPUs held (the time does not count).
        The non-resumable gap is measured from it: an allocation that has used next to nothing
        is infinitely far below anyone who used anything, and would otherwise requeue hours of
        non-resumable work for its very first job."""
        if self._used is None:
            return self._ratio(queue, gpus)
        budget = self._budgets.get(queue, 0.0)
        use = self._used.get(queue, 0.0) + gpus * seconds
        if budget <= 0:
            return math.inf if use > 0 else 0.0
        return use / budget

    def _ratio(self, queue: str, extra: int) -> float:
        budget = self._budgets.get(queue, 0.0)
        use = self._use(queue, extra)
        if budget <= 0:
            return math.inf if use > 0 else 0.0
        return use / budget

    def clearly_worse(self, victim: str, preemptor: str, gap: float, gained: int = 0,
                      lost: int = 0, protected_for: float = 0.0) -> bool:
        """Whether the victim leaf's allocation is ranked worse than the preemptor leaf's by more
        than `gap`, compared where their paths diverge. When use is what is held, the preemptor's
        side is compared holding the `gained` GPUs it asks for, and the swap must not leave the
        victim's side (holding `lost` GPUs fewer) better ranked than the preemptor's: no swap
        back can follow. With `protected_for`, the preemptor's side is compared with its
        `gained` GPUs charged for that long (`after_run`). A leaf is never clearly worse than
        itself."""
        if victim == preemptor:
            return False
        theirs, mine = self._divergence(victim, preemptor)
        worse = self.ratio(theirs)
        better = (self.after_run(mine, gained, protected_for) if protected_for
                  else self.ratio(mine, gained))
        if not beyond(worse, better, gap):
            return False
        return not self.by_holding or self.ratio(theirs, -lost) >= better

    def over_served(self, wanting: set[str], margin: float) -> Callable[[str], bool]:
        """Whether, for a leaf, some queue on its path is clearly worse than a sibling that is
        `wanting` (has long funded work waiting): its ratio exceeds that sibling's by more than
        `margin` (`TimeSlicing.swap_margin`). A sibling whose demand is met does not count: a
        small team that asks for less than its budget ranks low for ever, and being ahead of it
        takes nothing from it.

        Asked leaf after leaf, so each group of siblings' lowest wanting ratio is found once.
        The queue itself may be among them: no ratio (never negative) exceeds itself by the
        margin, so counting it changes no answer. Hazard: the test reads the ratios as they
        are when first asked; with use held now, an admission or eviction moves them, and the
        test must be made again."""
        tree = self._tree
        lowest: dict[str | None, float] = {}

        def over_served(leaf: str) -> bool:
            for name in self._path(leaf):
                parent = tree.parent(name)
                best = lowest.get(parent)
                if best is None:
                    siblings = tree.children(parent) if parent is not None else tree.roots
                    best = lowest[parent] = min(
                        (self.ratio(s) for s in siblings if s in wanting), default=math.inf)
                if self.ratio(name) > (1.0 + margin) * best:
                    return True
            return False

        return over_served

    def _use(self, queue: str, extra: int) -> float:
        if self._used is None:
            return float(self._held[queue].get(GPU, 0) + extra)
        return self._used.get(queue, 0.0)

    def _path(self, leaf: str) -> tuple[str, ...]:
        path = self._paths.get(leaf)
        if path is None:
            path = self._paths[leaf] = self._tree.path(leaf)
        return path

    def side(self, queue: str, other: str) -> str:
        """The queue on `queue`'s path that `clearly_worse` compares with `other`'s path (in
        either order): where the two paths diverge. Leaves with the same side against `other`
        compare with it alike."""
        return self._divergence(queue, other)[0]

    def _divergence(self, victim: str, preemptor: str) -> tuple[str, str]:
        """The two siblings, one on each path, under the deepest common ancestor."""
        pair = self._diverging.get((victim, preemptor))
        if pair is None:
            theirs, mine = self._path(victim), self._path(preemptor)
            common = 0
            while common < min(len(mine), len(theirs)) - 1 and mine[common] == theirs[common]:
                common += 1
            pair = self._diverging[victim, preemptor] = (theirs[common], mine[common])
        return pair


def beyond(worse: float, better: float, gap: float) -> bool:
    """`worse` exceeds `better` by more than `gap` (relative); anything used is beyond 0."""
    return worse > (1.0 + gap) * better if better > 0 else worse > 0
