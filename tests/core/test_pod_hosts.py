"""Which node each held pod of an admitted workload is given: a free slot of its admission's
node hints, on a host that is up."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from admitter.core.pod_hosts import WaitingPod, assign_hosts


def pods(pod_set: str, count: int, prefix: str = "p") -> list[WaitingPod]:
    return [WaitingPod(f"ns/{prefix}-{i}", pod_set) for i in range(count)]


def test_each_pod_takes_a_slot_the_admission_counted():
    found = assign_hosts({"main": {"n1": 2, "n2": 1}}, {}, pods("main", 3), {"n1", "n2"})
    assert Counter(found.hosts.values()) == {"n1": 2, "n2": 1}
    assert found.stranded == found.waiting == found.anywhere == []


def test_pod_sets_keep_their_own_hosts():
    hinted = {"head": {"n1": 1}, "workers": {"n2": 2}}
    found = assign_hosts(hinted, {}, [*pods("head", 1, "h"), *pods("workers", 2, "w")],
                         {"n1", "n2"})
    assert found.hosts == {"ns/h-0": "n1", "ns/w-0": "n2", "ns/w-1": "n2"}


def test_a_recreated_pod_takes_the_slot_its_predecessor_left():
    """Two pods on n1 and one on n2 were admitted; n1's two and n2's one run, then one on n1
    ended: its replacement goes to n1, the only host with a free slot."""
    found = assign_hosts({"main": {"n1": 2, "n2": 1}}, {"main": {"n1": 1, "n2": 1}},
                         pods("main", 1, "again"), {"n1", "n2"})
    assert found.hosts == {"ns/again-0": "n1"}


def test_a_pod_with_no_free_slot_waits():
    """Its predecessor still holds the slot (terminating): it waits held, never sent where
    the admission counted nothing."""
    found = assign_hosts({"main": {"n1": 1}}, {"main": {"n1": 1}}, pods("main", 1), {"n1"})
    assert found.hosts == {} and found.waiting == ["ns/p-0"]


def test_a_pod_whose_free_slots_are_all_on_hosts_down_is_stranded():
    found = assign_hosts({"main": {"n1": 1, "n2": 1}}, {"main": {"n2": 1}}, pods("main", 1),
                         {"n2"})
    assert found.hosts == {} and found.stranded == ["ns/p-0"]


def test_a_pod_goes_to_a_host_up_before_being_stranded():
    found = assign_hosts({"main": {"n1": 1, "n2": 1}}, {}, pods("main", 1), {"n2"})
    assert found.hosts == {"ns/p-0": "n2"} and found.stranded == []


def test_a_pod_set_the_admission_counted_nowhere_goes_anywhere():
    found = assign_hosts({}, {}, pods("main", 2), {"n1"})
    assert found.anywhere == ["ns/p-0", "ns/p-1"] and found.hosts == {}


HOSTS = [f"n{i}" for i in range(4)]


@given(st.dictionaries(st.sampled_from(HOSTS), st.integers(1, 4), min_size=1),
       st.dictionaries(st.sampled_from(HOSTS), st.integers(0, 4)),
       st.integers(0, 12), st.sets(st.sampled_from(HOSTS)))
def test_no_host_gets_more_pods_than_it_has_free_slots(hinted: dict[str, int],
                                                       placed: dict[str, int], waiting: int,
                                                       up: set[str]) -> None:
    found = assign_hosts({"main": hinted}, {"main": placed}, pods("main", waiting), up)
    given_to = Counter(found.hosts.values())
    free = {host: count - placed.get(host, 0) for host, count in hinted.items()}
    assert all(given_to[host] <= free[host] for host in given_to)
    assert set(given_to) <= up
    # every pod is told exactly one thing
    assert sorted([*found.hosts, *found.stranded, *found.waiting]) == sorted(
        p.key for p in pods("main", waiting))
    free_up = sum(max(free[h], 0) for h in hinted if h in up)
    assert len(found.hosts) == min(waiting, free_up)
    if found.stranded:
        assert any(free[h] > 0 for h in hinted if h not in up)
        assert not found.waiting
