"""Equal parts of cached objects kept once: shared, never changed, and the table bounded."""

import copy

from hypothesis import given
from hypothesis import strategies as st

from admitter.kube.shared import DROP, SharedParts, Sharing, share_at

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner,
                                                                max_size=3),
    max_leaves=8)


@given(st.lists(json_values, max_size=8))
def test_a_shared_value_equals_the_value_and_equal_values_are_one(values):
    table = SharedParts()
    shared = [table(copy.deepcopy(value)) for value in values]
    assert shared == values
    for value, one in zip(values, shared, strict=True):
        assert table(copy.deepcopy(value)) is one or not isinstance(one, dict | list)


def test_the_table_keeps_the_values_met_most_recently_within_its_limit():
    table = SharedParts(limit=3)
    often = table({"a": 1})
    for n in range(10):
        table({"n": n})
        assert table({"a": 1}) is often
    assert len(table) == 3


@given(json_values, st.lists(st.sampled_from(["a", "b", "0", "1"]), max_size=3))
def test_sharing_at_a_path_changes_nothing_it_is_given(obj, path):
    before = copy.deepcopy(obj)
    found = share_at(obj, tuple(path), lambda part: copy.deepcopy(part))
    assert obj == before
    assert found == before


def test_sharing_copies_only_the_path_to_the_shared_part():
    sharing = Sharing(("spec", "items", "1"),)
    first = {"metadata": {"name": "a"}, "spec": {"items": [{"x": 1}, {"y": 2}]}}
    second = copy.deepcopy(first)
    kept, again = sharing(first), sharing(second)
    assert kept is first  # the first of its kind is kept as it is
    assert again == second and again is not second
    assert again["spec"]["items"][1] is first["spec"]["items"][1]
    assert again["metadata"] is second["metadata"]  # off the path: not copied
    assert share_at([1, [2, 3]], ("1", "0"), lambda part: 9) == [1, [9, 3]]


def test_a_part_shared_as_drop_is_taken_out_of_a_copy():
    obj = {"spec": {"selector": {"a": "b"}, "suspend": True}}
    assert share_at(obj, ("spec", "selector"), lambda part: DROP) == {"spec": {"suspend": True}}
    assert obj == {"spec": {"selector": {"a": "b"}, "suspend": True}}
