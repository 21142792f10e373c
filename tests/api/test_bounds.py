"""Bounds on what an admin or a tenant may write: every refusal names the field and the value,
and none of them raises anything but a validation error."""

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from admitter.api.base import MAX_OVER_QUOTA_WEIGHT, check_label_key
from admitter.api.clusterqueue import ClusterQueue
from admitter.api.errors import InputError
from admitter.api.quantity import QUANTITY_PATTERN
from admitter.api.settings import Settings
from admitter.api.topology import Topology
from admitter.api.workload import Workload

from builders.core import GPU
from builders.kube import cluster_queue, topology, workload


def problems(kind, data) -> str:
    with pytest.raises(ValidationError) as caught:
        kind.model_validate(data)
    return str(InputError.from_validation("x", caught.value))


@pytest.mark.parametrize(
    "knobs, expected",
    [
        ({"quota": "500m"}, "gpu.quota: nvidia.com/gpu must be a whole number, got 500m"),
        ({"limit": "1.5"}, "gpu.limit: nvidia.com/gpu must be a whole number, got 1500m"),
        ({"quota": "1e30"}, "'1e30' is out of range"),
        ({"quota": 10**40}, "out of range"),
        ({"overQuotaWeight": 1e308}, "spec.resources.nvidia.com/gpu.overQuotaWeight"),
        ({"overQuotaWeight": float("inf")}, "overQuotaWeight"),
        ({"overQuotaWeight": float("nan")}, "overQuotaWeight"),
        ({"overQuotaWeight": -1}, "overQuotaWeight"),
    ],
)
def test_cluster_queue_amounts_and_weights_are_bounded(knobs, expected):
    assert expected in problems(ClusterQueue, cluster_queue("team-a", resources={GPU: knobs}))


def test_cpu_quota_may_be_fractional_and_the_largest_weight_is_accepted():
    largest = {"quota": 4, "overQuotaWeight": MAX_OVER_QUOTA_WEIGHT}
    queue = cluster_queue("team-a", resources={GPU: largest, "cpu": {"quota": "500m"}})
    assert ClusterQueue.model_validate(queue).spec.resources["cpu"].quota == 0.5


def test_priorities_are_int32():
    queue = cluster_queue("team-a", 1)
    queue["spec"]["priority"] = 2**31
    assert "spec.priority" in problems(ClusterQueue, queue)


def test_k_value_is_finite():
    assert "fairShare.kValue" in problems(Settings, {"fairShare": {"kValue": 1e308}})


@pytest.mark.parametrize(
    "settings, expected",
    [
        ({"shortJobs": {"maxMinRuntime": "-5m"}},
         "shortJobs.maxMinRuntime: '-5m' is not a duration"),
        ({"shortJobs": {"maxGpus": 0}},
         "shortJobs.maxGpus: Input should be greater than or equal to 1 (got 0)"),
        ({"shortJobs": {"maxGpus": 2.5}}, "shortJobs.maxGpus"),
        ({"shortJobs": {"leastRoomFraction": 1}},
         "shortJobs.leastRoomFraction: Input should be less than 1 (got 1)"),
        ({"shortJobs": {"leastRoomFraction": -0.01}}, "shortJobs.leastRoomFraction"),
        ({"shortJobs": {"leastRoomFraction": float("nan")}}, "shortJobs.leastRoomFraction"),
        ({"timeSlicing": {"swapMargin": -0.05}},
         "timeSlicing.swapMargin: Input should be greater than or equal to 0 (got -0.05)"),
        ({"timeSlicing": {"swapMargin": float("inf")}}, "timeSlicing.swapMargin"),
        ({"timeSlicing": {"swapMargin": 0.5, "nonResumableGap": 0.2}},
         "timeSlicing: nonResumableGap (0.2) must be at least swapMargin (0.5)"),
        ({"timeSlicing": {"swapMargn": 0.1}}, "timeSlicing.swapMargn: unknown key"),
    ],
)
def test_policy_settings_are_bounded(settings, expected):
    assert expected in problems(Settings, settings)


def test_policy_settings_take_their_edge_values():
    edge = Settings.model_validate({
        "shortJobs": {"maxMinRuntime": 0, "maxGpus": 1, "leastRoomFraction": 0},
        "timeSlicing": {"swapMargin": 0, "nonResumableGap": 0}})
    assert (edge.short_jobs.max_min_runtime, edge.time_slicing.non_resumable_gap) == (0.0, 0.0)


@pytest.mark.parametrize(
    "spec, expected",
    [
        ({"podSets": [{"name": "main", "count": 1, "requests": {"nvidia.com/gpu": -64}}]},
         "spec.podSets[0].requests: nvidia.com/gpu must not be negative, got -64"),
        ({"podSets": [{"name": "main", "count": 1, "requests": {"nvidia.com/gpu": "0.5"}}]},
         "nvidia.com/gpu must be a whole number, got 500m"),
        ({"podSets": [{"name": "main", "count": 10**9}]}, "spec.podSets[0].count"),
        ({"minRuntime": "99999d"}, "spec.minRuntime: '99999d' is not a duration admitter"),
        ({"minRuntime": "-0"}, "spec.minRuntime: '-0' is not a duration"),
        ({"topology": {"required": "$(rm -rf /)"}}, "spec.topology.required: '$(rm -rf /)' is"),
        ({"queueName": "Nope!"}, "spec.queueName"),
    ],
)
def test_workload_requests_durations_and_topology_are_checked(spec, expected):
    assert expected in problems(Workload, workload("w", gpus=8, **spec))


@pytest.mark.parametrize(
    "labels, expected",
    [
        (("kubernetes.io/hostname", "rack"),
         "kubernetes.io/hostname is the narrowest level (one node) and can only be the last"),
        (("topology.kubernetes.io/zone", "topology.kubernetes.io/region"),
         "list topology.kubernetes.io/region, topology.kubernetes.io/zone in that order"),
        (("r" * 400,), "is not a label key"),
        (("räck",), "'räck' is not a label key"),
        (("rack; rm -rf /",), "is not a label key"),
        (("rack\n",), "is not a label key"),
        (("-rack",), "is not a label key"),
        (("a" * 254 + "/rack",), "is not a label key"),
        (("",), "is not a label key"),
    ],
)
def test_topology_levels_are_label_keys_widest_first(labels, expected):
    assert expected in problems(Topology, topology("t", *labels))


def test_a_well_formed_topology_is_accepted():
    levels = ("topology.kubernetes.io/zone", "example.com/block", "rack", "kubernetes.io/hostname")
    assert Topology.model_validate(topology("t", *levels)).spec.label_keys() == list(levels)


_LABEL_NAME = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", fullmatch=True)
_DNS_LABEL = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)


@given(st.lists(_DNS_LABEL, min_size=1, max_size=3), _LABEL_NAME)
def test_every_qualified_label_key_is_accepted(prefix, name):
    key = ".".join(prefix) + "/" + name
    assert check_label_key(key) == key


@given(st.text(min_size=1, max_size=80))
def test_any_text_is_accepted_only_as_a_label_key(text):
    name = text.rpartition("/")[2]
    try:
        check_label_key(text)
    except ValueError as error:
        assert "is not a label key" in str(error)
    else:
        assert 1 <= len(name) <= 63 and name.isascii() and name[0].isalnum()
        assert "\n" not in text and " " not in text


_SCALARS = st.one_of(
    st.text(max_size=40),
    st.from_regex(QUANTITY_PATTERN, fullmatch=True),
    st.from_regex(r"[0-9]{1,3}e[0-9]{8,14}", fullmatch=True),
    st.floats(),
    st.integers(),
    st.booleans(),
    st.none(),
)


@given(_SCALARS, _SCALARS, _SCALARS)
def test_any_scalar_in_any_bounded_field_is_a_validation_error_or_valid(amount, weight, runtime):
    """Nothing but a ValidationError may escape: anything else is a 500 from the webhook."""
    queue = cluster_queue("team-a", resources={GPU: {"quota": amount, "overQuotaWeight": weight}})
    queue["spec"]["maxMinRuntime"] = runtime  # None too: the builder would leave it out
    with contextlib.suppress(ValidationError):
        ClusterQueue.model_validate(queue)
    with contextlib.suppress(ValidationError):
        Workload.model_validate(workload("w", gpus=8, minRuntime=runtime, podSets=[
            {"name": "main", "count": 1, "requests": {"nvidia.com/gpu": amount}}]))
