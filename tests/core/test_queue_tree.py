"""QueueTree: validation, navigation in creation order, leaf checks and roll-ups."""

from __future__ import annotations

import pytest

from admitter.core.model import Queue
from admitter.core.queue_tree import QueueTree, QueueTreeError

from builders.core import queue, tree


def org() -> QueueTree:
    return tree(
        queue("org"),
        queue("research", parent="org"),
        queue("infra"),
        queue("vision", parent="research"),
        queue("nlp", parent="research"),
        queue("ops", parent="org"),
    )


def test_navigation() -> None:
    t = org()
    assert t.roots == ("org", "infra")
    assert t.children("org") == ("research", "ops")
    assert t.children("research") == ("vision", "nlp")
    assert t.parent("nlp") == "research"
    assert t.parent("org") is None
    assert t.is_leaf("ops") and not t.is_leaf("research")
    assert t.leaves() == ("infra", "ops", "vision", "nlp")
    assert t.ancestors("nlp") == ("research", "org")
    assert t.ancestors("org") == ()
    assert t.path("nlp") == ("org", "research", "nlp")
    assert list(t) == ["org", "infra", "research", "ops", "vision", "nlp"]
    assert len(t) == 6 and "ops" in t and "nope" not in t
    assert t.queue("vision").parent == "research"


def test_children_follow_creation_order_not_input_order() -> None:
    queues = [
        Queue("b", parent="p", order=2),
        Queue("p", order=0),
        Queue("a", parent="p", order=3),
        Queue("c", parent="p", order=1),
        Queue("z", parent="p", order=1),
    ]
    assert QueueTree(queues).children("p") == ("c", "z", "b", "a")
    assert QueueTree(reversed(queues)).children("p") == ("c", "z", "b", "a")


@pytest.mark.parametrize(
    ("queues", "culprit", "words"),
    [
        ([queue("a"), queue("b", parent="ghost")], "b", "unknown parent 'ghost'"),
        ([queue("a"), queue("a")], "a", "defined twice"),
        ([queue("a", parent="a")], "a", "parent cycle a -> a"),
        ([queue("r"), queue("x", parent="z"), queue("y", parent="x"), queue("z", parent="y")],
         "x", "x -> z -> y -> x"),
        ([queue("tail", parent="b"), queue("b", parent="c"), queue("c", parent="b")],
         "b", "parent cycle b -> c -> b"),
    ],
)
def test_invalid_trees_name_the_queue(queues: list[Queue], culprit: str, words: str) -> None:
    with pytest.raises(QueueTreeError) as caught:
        tree(*queues)
    assert caught.value.queue_name == culprit
    assert words in str(caught.value) and repr(culprit) in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_validate_leaf() -> None:
    t = org()
    t.validate_leaf("vision")
    with pytest.raises(QueueTreeError, match=r"'research'.*parent queue.*vision, nlp"):
        t.validate_leaf("research")
    with pytest.raises(QueueTreeError, match="'ghost': no such queue"):
        t.validate_leaf("ghost")


def test_unknown_queue_lookups_raise() -> None:
    with pytest.raises(QueueTreeError, match="'ghost'"):
        org().children("ghost")


def test_roll_up_sums_subtrees_and_ignores_strangers() -> None:
    total = org().roll_up({"vision": 2, "nlp": 3, "ops": 1, "infra": 5, "gone": 100}, 0)
    assert total == {"org": 6, "research": 5, "vision": 2, "nlp": 3, "ops": 1, "infra": 5}


def test_sibling_groups_top_down() -> None:
    assert org().sibling_groups() == [
        (None, ("org", "infra")),
        ("org", ("research", "ops")),
        ("research", ("vision", "nlp")),
    ]
