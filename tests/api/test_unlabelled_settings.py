"""The opt-in for unlabelled work: a namespace selector that means what a Kubernetes
LabelSelector means, refused with the field and the value when it is malformed, and never
selecting the control plane's or admitter's own namespace."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from admitter.api.errors import InputError
from admitter.api.settings import NEVER_SELECTED, LabelSelector, Settings, UnlabelledWork
from admitter.kube.names import NAMESPACE

OPT_IN = {"matchLabels": {"admitter.dev/quota": "enforced"}}


def opt_in(selector: dict, **more) -> UnlabelledWork:
    return Settings.model_validate(
        {"unlabelledWork": {"namespaceSelector": selector, **more}}).unlabelled_work


def problems(data: dict) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as error:
        Settings.model_validate(data)
    return InputError.from_validation("config.yaml", error.value).problems


def test_unlabelled_work_is_left_alone_unless_opted_in():
    assert Settings().unlabelled_work is None


def test_match_labels_and_expressions_must_all_hold():
    work = opt_in({"matchLabels": {"team": "vision"},
                   "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]},
                                        {"key": "legacy", "operator": "DoesNotExist"}]})
    assert work.local_queue == "default"
    assert work.selects("vision", {"team": "vision", "tier": "gpu"})
    assert not work.selects("vision", {"team": "vision", "tier": "cpu"})
    assert not work.selects("vision", {"team": "vision", "tier": "gpu", "legacy": "yes"})
    assert not work.selects("nlp", {"team": "nlp", "tier": "gpu"})


@pytest.mark.parametrize("namespace", [*NEVER_SELECTED, NAMESPACE])
def test_system_namespaces_are_never_selected_even_when_they_match(namespace):
    work = opt_in({"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                         "operator": "Exists"}]})
    assert not work.selects(namespace, {"kubernetes.io/metadata.name": namespace})
    assert work.selects("team-a", {"kubernetes.io/metadata.name": "team-a"})


def test_the_webhook_selector_adds_the_system_namespaces_exclusion():
    work = opt_in(OPT_IN)
    assert work.webhook_namespace_selector() == {
        "matchLabels": {"admitter.dev/quota": "enforced"},
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                              "values": list(NEVER_SELECTED)}]}


@pytest.mark.parametrize("selector, path, said", [
    ({}, "unlabelledWork.namespaceSelector", "an empty selector selects every namespace"),
    ({"matchLabels": {"bad key!": "x"}}, "unlabelledWork.namespaceSelector.matchLabels",
     "'bad key!' is not a label key"),
    ({"matchLabels": {"team": "a b"}}, "unlabelledWork.namespaceSelector.matchLabels.team",
     "'a b' is not a label value"),
    ({"matchExpressions": [{"key": "team", "operator": "In"}]},
     "unlabelledWork.namespaceSelector.matchExpressions[0]", "operator In needs values"),
    ({"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]},
     "unlabelledWork.namespaceSelector.matchExpressions[0]", "operator Exists takes no values"),
    ({"matchExpressions": [{"key": "team", "operator": "Equals", "values": ["a"]}]},
     "unlabelledWork.namespaceSelector.matchExpressions[0].operator", "'Equals'"),
    ({"matchLabel": {"team": "a"}}, "unlabelledWork.namespaceSelector.matchLabel",
     "unknown key"),
])
def test_a_malformed_selector_is_refused_naming_the_field_and_the_value(selector, path, said):
    found = problems({"unlabelledWork": {"namespaceSelector": selector}})
    assert any(where.startswith(path) and said in why for where, why in found), found


def test_the_default_queue_must_be_an_object_name():
    found = problems({"unlabelledWork": {"namespaceSelector": OPT_IN, "localQueue": "Not_A"}})
    assert [where for where, _ in found] == ["unlabelledWork.localQueue"]
    assert "'Not_A' is not a valid name" in found[0][1]


_labels = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y"]),
                          max_size=3)


@given(_labels, _labels)
def test_match_labels_select_exactly_the_namespaces_carrying_every_pair(wanted, labels):
    selector = LabelSelector.model_validate({"matchLabels": wanted})
    assert selector.matches(labels) == (wanted.items() <= labels.items())


@given(st.sampled_from(["a", "b"]), st.lists(st.sampled_from(["x", "y"]), min_size=1), _labels)
def test_in_and_not_in_are_complements(key, values, labels):
    def selector(operator):
        return LabelSelector.model_validate(
            {"matchExpressions": [{"key": key, "operator": operator, "values": values}]})
    assert selector("In").matches(labels) != selector("NotIn").matches(labels)
