"""Each node's devices of the mapped DeviceClasses, read from ResourceSlices as admitter's node
model counts them: the selector subset it evaluates, and the devices it leaves out."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from admitter.kube.core_values import core_node
from admitter.kube.devices import (
    class_label,
    class_selector,
    held_devices,
    node_devices,
    published_devices,
)
from admitter.testing.dra_driver import DEVICE_CLASS, DRIVER, device_class, resource_slice

GPU = "nvidia.com/gpu"
MAPPING = {DEVICE_CLASS: GPU}


def counted(slices, classes=None, mapping=MAPPING, warn=None):
    """Each node's devices, as the controller reads them."""
    classes = [device_class()] if classes is None else classes
    if warn is None:
        return node_devices(published_devices(slices, classes, mapping))
    return node_devices(published_devices(slices, classes, mapping, warn))


def node(name):
    return {"metadata": {"name": name, "uid": f"uid-{name}", "labels": {"rack": "r1"}},
            "status": {"allocatable": {"cpu": "96", GPU: "0"}}}


def with_selectors(name, *expressions):
    return {"metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]}}


@pytest.mark.parametrize(("expression", "driver", "attributes", "selected"), [
    ("device.driver == 'gpu.nvidia.com'", "gpu.nvidia.com", {}, True),
    ('device.driver == "gpu.nvidia.com"', "other.example.com", {}, False),
    ("device.attributes['gpu.nvidia.com'].type == 'gpu'", "gpu.nvidia.com",
     {"type": {"string": "gpu"}}, True),
    ("device.attributes['gpu.nvidia.com'].type == 'gpu'", "gpu.nvidia.com",
     {"type": {"string": "mig"}}, False),
    ("device.attributes['gpu.nvidia.com'].type == 'gpu'", "gpu.nvidia.com", {}, False),
    ("device.attributes['example.com'].memoryGiB == 80", "gpu.nvidia.com",
     {"example.com/memoryGiB": {"int": 80}}, True),
    ("device.attributes['example.com'].healthy == true", "x", {"example.com/healthy":
                                                                 {"bool": True}}, True),
    ("(device.driver == 'gpu.nvidia.com') && device.attributes['gpu.nvidia.com'].index == 3",
     "gpu.nvidia.com", {"index": {"int": 3}}, True),
])
def test_the_selector_subset_is_evaluated_as_cel_would(expression, driver, attributes, selected):
    predicate = class_selector(with_selectors("c", expression))
    assert predicate is not None
    assert predicate(driver, attributes) is selected


@pytest.mark.parametrize("expression", [
    "device.driver == 'a' || device.driver == 'b'",
    "device.driver.startsWith('gpu')",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.driver == 'a' & device.driver == 'a'",
    "(device.driver == 'a' && device.driver == 'b')",
])
def test_any_other_expression_is_not_evaluated(expression):
    assert class_selector(with_selectors("c", expression)) is None


def test_a_class_without_selectors_selects_every_device():
    predicate = class_selector({"metadata": {"name": "c"}, "spec": {}})
    assert predicate is not None and predicate("any.example.com", {})


def test_each_node_counts_the_devices_its_slices_publish_for_mapped_classes():
    slices = [resource_slice(node("n1"), 8), resource_slice(node("n2"), 4)]
    found = counted(slices)
    assert {name: on.counts for name, on in found.items()} == {"n1": {GPU: 8}, "n2": {GPU: 4}}
    assert found["n1"].classes == {DEVICE_CLASS}


def test_unmapped_classes_and_other_drivers_count_nothing():
    other = resource_slice(node("n1"), 8, driver="nic.example.com")
    assert counted([other]) == {}
    assert counted([resource_slice(node("n1"), 8)], mapping={}) == {}


def test_a_class_admitter_cannot_evaluate_counts_nothing_and_says_so():
    warnings = []
    found = node_devices(published_devices([resource_slice(node("n1"), 8)],
                         [with_selectors(DEVICE_CLASS, "device.driver.startsWith('gpu')")],
                         MAPPING, warnings.append))
    assert found == {}
    assert len(warnings) == 1 and DEVICE_CLASS in warnings[0] and GPU in warnings[0]


def test_only_the_newest_generation_of_a_pool_counts():
    old = resource_slice(node("n1"), 8, generation=1)
    new = resource_slice(node("n1"), 6, generation=2)
    assert counted([old, new])["n1"].counts == {GPU: 6}


def test_devices_not_on_one_node_shared_or_tainted_are_left_out():
    network = resource_slice(node("n1"), 8)
    del network["spec"]["nodeName"]
    network["spec"]["allNodes"] = True
    local = resource_slice(node("n2"), 4)
    devices = local["spec"]["devices"]
    devices[0]["consumesCounters"] = [{"counterSet": "gpu-0", "counters": {}}]
    devices[1]["allowMultipleAllocations"] = True
    devices[2]["taints"] = [{"key": "unhealthy", "effect": "NoSchedule"}]
    found = counted([network, local])
    assert {name: on.counts for name, on in found.items()} == {"n2": {GPU: 1}}


def test_a_device_two_classes_of_one_resource_select_counts_once():
    second = device_class(name="all-gpus.example.com")
    mapping = {DEVICE_CLASS: GPU, "all-gpus.example.com": GPU}
    found = counted([resource_slice(node("n1"), 8)], [device_class(), second], mapping)
    assert found["n1"].counts == {GPU: 8}
    assert found["n1"].classes == {DEVICE_CLASS, "all-gpus.example.com"}


def test_claims_held_devices_are_counted_on_the_node_of_each_device():
    published = published_devices([resource_slice(node("n1"), 8), resource_slice(node("n2"), 8)],
                                  [device_class()], MAPPING)
    claim = {"metadata": {"name": "c"}, "status": {"allocation": {"devices": {"results": [
        {"driver": DRIVER, "pool": "n1", "device": "gpu-0"},
        {"driver": DRIVER, "pool": "n2", "device": "gpu-7"},
        {"driver": "nic.example.com", "pool": "n1", "device": "eth0"}]}}}}
    unallocated = {"metadata": {"name": "d"}, "status": {}}
    assert held_devices([claim, unallocated], published, lambda _: True) == {
        "n1": {GPU: 1}, "n2": {GPU: 1}}
    assert held_devices([claim], published, lambda _: False) == {}


def test_the_core_node_offers_its_devices_and_carries_the_class_label():
    on = counted([resource_slice(node("n1"), 8)])["n1"]
    core = core_node(node("n1"), {}, on)
    assert core.allocatable[GPU] == 8
    assert core.labels == {"rack": "r1", class_label(DEVICE_CLASS): "true"}
    assert DRIVER in class_label(DRIVER)


@given(st.lists(st.tuples(st.sampled_from(["n1", "n2", "n3"]),
                          st.sampled_from(["plain", "counters", "tainted", "other-driver"])),
                max_size=40))
def test_each_node_offers_exactly_its_plain_devices_of_the_mapped_driver(devices):
    """Whatever the mix, a node's count is its whole, untainted devices of the mapped class,
    never more: a device that is part of another or reserved offers nothing."""
    slices = []
    for name in ("n1", "n2", "n3"):
        for driver in (DRIVER, "nic.example.com"):
            published = resource_slice(node(name), 0, driver=driver)
            for index, (where, kind) in enumerate(devices):
                if where != name or (driver == DRIVER) == (kind == "other-driver"):
                    continue
                device = {"name": f"dev-{index}", "attributes": {"type": {"string": "gpu"}}}
                if kind == "counters":
                    device["consumesCounters"] = [{"counterSet": "gpu", "counters": {}}]
                if kind == "tainted":
                    device["taints"] = [{"key": "bad", "effect": "NoExecute"}]
                published["spec"]["devices"].append(device)
            slices.append(published)
    found = counted(slices)
    expected = {name: sum(1 for where, kind in devices if where == name and kind == "plain")
                for name in ("n1", "n2", "n3")}
    assert {name: on.counts.get(GPU, 0) for name, on in found.items()} == {
        name: count for name, count in expected.items() if count}
