"""compute_fair_share, rule by rule, on small hand-checked trees.

The fair-share vectors (tests/data/fairshare.yaml) are checked through the scenario loader
in tests/commands; these cases cover what the vectors do not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from admitter.core.fairshare import ResourceShare
from admitter.core.model import GPU
from admitter.core.queue_tree import QueueTree, QueueTreeError

from builders.core import CPU, GIB, MEMORY, knobs, queue, tree
from builders.fairshare import divide, gpu_shares


@dataclass
class Case:
    id: str
    queues: QueueTree
    gpus: int
    demand: Mapping[str, int]
    expect: Mapping[str, int]
    usage: Mapping[str, float] = field(default_factory=dict)
    k: float = 0.0


CASES = [
    Case("three levels: each parent's share is what its children divide",
         tree(queue("org", -1), queue("team-a", 4, parent="org"),
              queue("team-b", 2, parent="org"), queue("a1", 1, parent="team-a", weight=1),
              queue("a2", 1, parent="team-a", weight=3), queue("b1", parent="team-b")),
         gpus=12, demand={"a1": 6, "a2": 6, "b1": 2},
         # team-a 4 + team-b 2 deserved, team-b is then satisfied so team-a takes the other 6;
         # inside team-a 8 over quota split 1:3 offers a2 6, it wants 5, a1 takes the rest.
         expect={"org": 12, "team-a": 10, "team-b": 2, "a1": 4, "a2": 6, "b1": 2}),
    Case("leaf limit caps the share, the sibling gets the rest",
         tree(queue("q1", 2, limit=3), queue("q2")),
         gpus=10, demand={"q1": 8, "q2": 8}, expect={"q1": 3, "q2": 7}),
    Case("parent limit caps the subtree; its demand is what its children can use",
         tree(queue("p", limit=4), queue("r"), queue("c1", parent="p"), queue("c2", parent="p")),
         gpus=10, demand={"c1": 5, "c2": 5, "r": 10}, expect={"p": 4, "c1": 2, "c2": 2, "r": 6}),
    Case("child limit lowers the parent's demand, leaving surplus to the parent's sibling",
         tree(queue("p"), queue("r"), queue("c", parent="p", limit=2)),
         gpus=10, demand={"c": 9, "r": 9}, expect={"p": 2, "c": 2, "r": 8}),
    Case("zero weight: deserved only, surplus stays undivided rather than go to it",
         tree(queue("q1", 2, weight=0), queue("q2", 1, weight=1)),
         gpus=10, demand={"q1": 8, "q2": 3}, expect={"q1": 2, "q2": 3}),
    Case("the top bucket exhausts the surplus; the lower one keeps only its deserved",
         tree(queue("low", 3, weight=100, priority=1), queue("high", priority=2),
              queue("high2", priority=2)),
         gpus=10, demand={"low": 5, "high": 8, "high2": 8},
         # 7 over quota: 3.5 each floors to 3, the tie on .5 goes to high (created first).
         expect={"low": 3, "high": 4, "high2": 3}),
    Case("three buckets: the middle one takes what the top leaves, the bottom gets nothing",
         tree(queue("top", priority=3), queue("mid", priority=2), queue("bottom", 1, priority=1)),
         gpus=10, demand={"top": 2, "mid": 20, "bottom": 5},
         expect={"top": 2, "mid": 7, "bottom": 1}),
    Case("quota -1 deserves the whole amount being divided",
         tree(queue("q1", -1), queue("q2")),
         gpus=8, demand={"q1": 3, "q2": 10}, expect={"q1": 3, "q2": 5}),
    Case("quota -1 below a parent means the parent's share, not the cluster's",
         tree(queue("p", 4, weight=0), queue("other"), queue("c", -1, parent="p")),
         gpus=10, demand={"c": 9, "other": 9}, expect={"p": 4, "c": 4, "other": 6}),
    Case("deserved quotas are granted even when they add up to more than the parent has",
         tree(queue("p", 2), queue("c1", 2, parent="p"), queue("c2", 3, parent="p")),
         gpus=2, demand={"c1": 5, "c2": 5}, expect={"p": 2, "c1": 2, "c2": 3}),
    Case("the remainder follows the last round's fractions, not earlier ones",
         tree(queue("q0", weight=1), queue("q1", weight=2), queue("q2", weight=2)),
         gpus=3, demand={"q0": 1, "q1": 1, "q2": 2},
         # Round 1 offers .6/1.2/1.2: q1 is satisfied, q2 takes 1, q0 0 (fraction .6).
         # Round 2 offers the last unit 1:2 (1/3, 2/3): q2's fraction is now the larger.
         expect={"q0": 0, "q1": 1, "q2": 2}),
    Case("what a satisfied queue leaves of its offer goes round again",
         tree(queue("q1"), queue("q2"), queue("q3")),
         gpus=7, demand={"q1": 2, "q2": 9, "q3": 9},
         # 7/3 each: q1 wants 2, q2 and q3 take 2; the last unit is offered .5/.5 in round 2,
         # which floors to nothing, so the tie goes to q2, created first.
         expect={"q1": 2, "q2": 3, "q3": 2}),
    Case("kValue 1: the heavier user of the two siblings gets less surplus",
         tree(queue("p"), queue("x", parent="p"), queue("y", parent="p")),
         gpus=12, demand={"x": 12, "y": 12}, usage={"p": 1.0, "x": 0.75, "y": 0.25}, k=1.0,
         # share weights .5 + (.5 - .75) = .25 and .5 + (.5 - .25) = .75
         expect={"x": 3, "y": 9}),
    Case("kValue 2: usage can clip a share weight to zero",
         tree(queue("x"), queue("y")), gpus=12, demand={"x": 12, "y": 12},
         usage={"x": 0.75, "y": 0.25}, k=2.0, expect={"x": 0, "y": 12}),
    Case("kValue 2: weights are renormalised among the queues still wanting more",
         tree(queue("x"), queue("y")), gpus=12, demand={"x": 12, "y": 5},
         usage={"x": 0.75, "y": 0.25}, k=2.0, expect={"x": 7, "y": 5}),
    Case("usage never reduces deserved quota",
         tree(queue("x", 6), queue("y")),
         gpus=12, demand={"x": 12, "y": 12}, usage={"x": 1.0, "y": 0.0}, k=5.0,
         expect={"x": 6, "y": 6}),
    Case("usage past the cluster's GPU-time clips every weight: plain weights decide",
         tree(queue("x", weight=1), queue("y", weight=3)),
         gpus=8, demand={"x": 8, "y": 8}, usage={"x": 3.0, "y": 3.0}, k=1.0,
         expect={"x": 2, "y": 6}),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_gpu_division(case: Case) -> None:
    shares = gpu_shares(case.queues, case.gpus, case.demand, case.usage, case.k)
    assert {name: shares[name] for name in case.expect} == case.expect


def test_deserved_and_requestable_are_reported() -> None:
    queues = tree(queue("q1", 2, limit=5), queue("q2", 4))
    result = divide(queues, {GPU: 9}, {"q1": {GPU: 8}, "q2": {GPU: 3}})
    assert result.of("q1", GPU) == ResourceShare(fair_share=5, deserved=2, requestable=5)
    assert (result.deserved("q2", GPU), result.requestable("q2", GPU)) == (3, 3)
    assert result.share("q2", GPU) == 3
    assert result.share("ghost", GPU) == 0 and result.deserved("q1", "fpga") == 0


def test_resources_divide_independently() -> None:
    queues = tree(
        queue("gpu-heavy", cpu=knobs(0)),
        queue("cpu-heavy", cpu=knobs(0)),
    )
    demand = {"gpu-heavy": {GPU: 8, CPU: 4_000}, "cpu-heavy": {GPU: 1, CPU: 60_000}}
    result = divide(queues, {GPU: 8, CPU: 64_000}, demand)
    assert result.resources == (CPU, GPU)
    assert (result.share("gpu-heavy", GPU), result.share("cpu-heavy", GPU)) == (7, 1)
    assert (result.share("gpu-heavy", CPU), result.share("cpu-heavy", CPU)) == (4_000, 60_000)


def test_memory_in_bytes_is_divided_exactly() -> None:
    queues = tree(queue("q1", memory=knobs(0, 1)), queue("q2", memory=knobs(0, 2)))
    total = 10 * GIB + 1
    result = divide(queues, {MEMORY: total}, {"q1": {MEMORY: total}, "q2": {MEMORY: total}})
    # (10 GiB + 1) / 3 leaves fractions 2/3 and 1/3: the last byte goes to q1.
    assert result.share("q1", MEMORY) == total // 3 + 1
    assert result.share("q2", MEMORY) == 2 * total // 3
    assert result.share("q1", MEMORY) + result.share("q2", MEMORY) == total


def test_demanded_resource_missing_from_capacity_still_gets_deserved() -> None:
    fpga = "example.com/fpga"
    queues = tree(queue("q1", **{fpga: knobs(1)}), queue("q2"))
    result = divide(queues, {GPU: 4}, {"q1": {fpga: 2}, "q2": {fpga: 2}})
    assert result.resources == (fpga, GPU)
    assert (result.share("q1", fpga), result.share("q2", fpga)) == (1, 0)


@pytest.mark.parametrize(("name", "words"), [("p", "parent queue"), ("ghost", "no such queue")])
def test_demand_must_name_a_leaf(name: str, words: str) -> None:
    queues = tree(queue("p"), queue("c", parent="p"))
    with pytest.raises(QueueTreeError, match=words):
        divide(queues, {GPU: 1}, {name: {GPU: 1}})
