"""Owed shares: the accounting keeps a division across demand changes that cannot move it, and
what it integrates is always what a fresh division of the current demand gives."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from admitter.core.fairshare import FairShare, compute_fair_share
from admitter.core.model import GPU, UNLIMITED, Node, PodSet, Queue, ResourceQuota, Workload
from admitter.core.queue_tree import QueueTree
from admitter.sim import accounting as accounting_module
from admitter.sim.accounting import Accounting


@st.composite
def trees(draw: st.DrawFn) -> list[Queue]:
    """Two to eight queues, parents among the first three, KAI knobs that make them compete."""
    queues: list[Queue] = []
    for i in range(draw(st.integers(2, 8))):
        parent = draw(st.sampled_from([None, *range(min(i, 3))]))
        knobs = ResourceQuota(
            quota=draw(st.sampled_from([0, 0, 2, 4, 8, UNLIMITED])),
            limit=draw(st.sampled_from([UNLIMITED, UNLIMITED, UNLIMITED, 6, 12])),
            over_quota_weight=draw(st.sampled_from([0.0, 1.0, 1.0, 2.0, 3.5])),
        )
        queues.append(Queue(name=f"q{i}", parent=None if parent is None else f"q{parent}",
                            priority=draw(st.sampled_from([0, 0, 1])),
                            resources={GPU: knobs}, order=i))
    return queues


def funded(key: str, queue: str, gpus: int) -> Workload:
    return Workload(key, queue, (PodSet("main", 1, {GPU: gpus}),), 0.0, min_runtime=60.0)


@settings(max_examples=300, deadline=None)
@given(trees(), st.integers(1, 40), st.data())
def test_owed_shares_follow_every_demand_change(queues: list[Queue], capacity: int,
                                                data: st.DataObject) -> None:
    tree = QueueTree(queues)
    leaves = tree.leaves()
    accounting = Accounting(tree, [Node("n", {GPU: capacity})])
    demand = dict.fromkeys(leaves, 0)
    present: list[Workload] = []
    changes = data.draw(st.lists(st.tuples(st.sampled_from(leaves), st.integers(1, 9),
                                           st.booleans()), min_size=1, max_size=30))
    for moment, (leaf, gpus, leaving) in enumerate(changes):
        accounting.advance(float(moment))
        if leaving and present:
            workload = present.pop(data.draw(st.integers(0, len(present) - 1)))
            accounting.demand(workload, -1)
            demand[workload.queue] -= gpus_of(workload)
        else:
            workload = funded(f"w{moment}", leaf, gpus)
            present.append(workload)
            accounting.demand(workload, 1)
            demand[leaf] += gpus
        before = dict(accounting.owed)
        accounting.advance(moment + 0.5)
        fresh = compute_fair_share(tree, {GPU: capacity},
                                   {q: {GPU: g} for q, g in demand.items() if g > 0}, {}, 0.0)
        for name in leaves:  # half a second at the share now in force
            assert accounting.owed[name] - before[name] == fresh.share(name, GPU) * 0.5, name


def gpus_of(workload: Workload) -> int:
    return workload.requests()[GPU]


def test_a_change_to_a_queue_that_wants_more_than_its_share_keeps_the_division(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both queues want more than the 8 GPUs there are: more demand on one divides nothing
    anew; a change that leaves a queue wanting less than its share does."""
    divisions: list[object] = []

    def counted(*arguments: Any) -> FairShare:
        divisions.append(arguments)
        return compute_fair_share(*arguments)

    monkeypatch.setattr(accounting_module, "compute_fair_share", counted)
    queues = [Queue(name=n, resources={GPU: ResourceQuota(quota=0)}, order=i)
              for i, n in enumerate(("a", "b"))]
    accounting = Accounting(QueueTree(queues), [Node("n", {GPU: 8})])
    big_b = funded("b1", "b", 6)
    for workload in (funded("a1", "a", 6), big_b):
        accounting.demand(workload, 1)
    accounting.advance(1.0)
    assert accounting.owed == {"a": 4.0, "b": 4.0} and len(divisions) == 1
    accounting.demand(funded("a2", "a", 5), 1)  # a wants 11, still more than its 4
    accounting.advance(2.0)
    assert accounting.owed == {"a": 8.0, "b": 8.0} and len(divisions) == 1
    accounting.demand(big_b, -1)  # b wants nothing now: a is owed all 8
    accounting.advance(3.0)
    assert accounting.owed == {"a": 16.0, "b": 8.0} and len(divisions) == 2
