"""The install check compares the registered webhook configurations with the ones `admitter
webhooks` renders from the same settings, and names each difference: a webhook missing or
extra, a field that differs (after the API server's defaults), a CA bundle without the CA the
controller serves with. Reported in a gauge per kind, a log line, and, from the leader only,
an Event on the configuration concerned."""

from __future__ import annotations

import asyncio
import copy
import logging
from pathlib import Path

import pytest
from fake_api import FakeApi

from admitter import pki
from admitter.api.settings import Settings, UnlabelledWork
from admitter.controller.install_check import (
    CA_BUNDLE,
    DIFFERENT_FIELD,
    MISSING_CONFIGURATION,
    MISSING_WEBHOOK,
    PROBLEM_KINDS,
    UNEXPECTED_WEBHOOK,
    InstallCheck,
    Problem,
    install_problems,
)
from admitter.controller.metrics import Metrics
from admitter.kube.events import EventRecorder
from admitter.kube.names import CA_FILE
from admitter.kube.objects import Obj
from admitter.webhook.registration import endpoint_client_config, webhook_configurations

MUTATING, VALIDATING = "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"
SERVED = pki.new_ca("admitter-webhook-ca")
OLD = pki.new_ca("admitter-webhook-ca-previous")


def opt_in(selected: str = "enforced") -> UnlabelledWork:
    settings = Settings.model_validate({"unlabelledWork": {
        "namespaceSelector": {"matchLabels": {"admitter.dev/quota": selected}}}})
    assert settings.unlabelled_work is not None
    return settings.unlabelled_work


def rendered(unlabelled: UnlabelledWork | None = None, *cas: pki.CertKey,
             url_host: str | None = None) -> tuple[Obj, Obj]:
    bundle = b"".join(ca.cert_pem for ca in cas) or None
    return webhook_configurations(endpoint_client_config(url_host, bundle), unlabelled)


def registered(configurations: tuple[Obj, Obj]) -> dict[str, Obj | None]:
    return {c["kind"]: copy.deepcopy(c) for c in configurations}


def problems(expected: tuple[Obj, Obj], found: dict[str, Obj | None],
             served: pki.CertKey | None = SERVED, endpoint_known: bool = True) -> list[Problem]:
    return install_problems(expected, found, None if served is None else served.cert,
                            endpoint_known)


def test_the_rendered_configurations_registered_as_they_are_have_no_problem() -> None:
    expected = rendered(opt_in())
    assert problems(expected, registered(rendered(opt_in(), SERVED))) == []


def test_a_rotation_bundle_with_the_served_ca_and_the_previous_one_is_fine() -> None:
    assert problems(rendered(), registered(rendered(None, SERVED, OLD))) == []
    assert problems(rendered(), registered(rendered(None, OLD, SERVED))) == []


def test_opted_in_settings_without_their_webhooks_name_each_missing_one() -> None:
    found = problems(rendered(opt_in()), registered(rendered(None, SERVED)))
    assert found == [Problem(MISSING_WEBHOOK, MUTATING, "mutate-unlabelled-jobs.admitter.dev"),
                     Problem(MISSING_WEBHOOK, MUTATING, "mutate-pods.admitter.dev"),
                     Problem(MISSING_WEBHOOK, VALIDATING, "validate-pods.admitter.dev")]
    assert str(found[1]) == ("MutatingWebhookConfiguration admitter-webhook: webhook "
                             "mutate-pods.admitter.dev is missing")


def test_opt_in_webhooks_the_settings_no_longer_need_are_reported() -> None:
    found = problems(rendered(), registered(rendered(opt_in(), SERVED)))
    assert [(p.kind, p.webhook) for p in found] == [
        (UNEXPECTED_WEBHOOK, "mutate-unlabelled-jobs.admitter.dev"),
        (UNEXPECTED_WEBHOOK, "mutate-pods.admitter.dev"),
        (UNEXPECTED_WEBHOOK, "validate-pods.admitter.dev")]


def test_a_namespace_selector_that_drifted_from_the_settings_shows_both_values() -> None:
    found = problems(rendered(opt_in("enforced")), registered(rendered(opt_in("old"), SERVED)))
    assert {p.webhook for p in found} == {"mutate-unlabelled-jobs.admitter.dev",
                                          "mutate-pods.admitter.dev", "validate-pods.admitter.dev"}
    assert {(p.kind, p.field) for p in found} == {(DIFFERENT_FIELD, "namespaceSelector")}
    assert '"admitter.dev/quota":"enforced"' in found[0].expected
    assert '"admitter.dev/quota":"old"' in found[0].found
    assert "namespaceSelector is {" in str(found[0])


def test_the_api_servers_defaults_are_no_difference() -> None:
    found = registered(rendered(None, SERVED))
    validating = found[VALIDATING]
    assert validating is not None
    hook = validating["webhooks"][1]  # validate-resources: no selectors of its own
    assert "namespaceSelector" not in hook
    hook.update({"namespaceSelector": {}, "objectSelector": {}})
    assert problems(rendered(), found) == []
    del hook["timeoutSeconds"]  # as stored, that is the server's default of 10, not 5
    assert problems(rendered(), found) == [Problem(
        DIFFERENT_FIELD, VALIDATING, "validate-resources.admitter.dev", "timeoutSeconds", "5",
        "10")]


def test_a_field_added_by_hand_is_a_difference() -> None:
    found = registered(rendered(None, SERVED))
    mutating = found[MUTATING]
    assert mutating is not None
    mutating["webhooks"][0]["failurePolicy"] = "Ignore"
    mutating["webhooks"][0]["matchConditions"] = [{"name": "none", "expression": "false"}]
    assert [(p.field, p.expected, p.found) for p in problems(rendered(), found)] == [
        ("failurePolicy", '"Fail"', '"Ignore"'),
        ("matchConditions", "unset", '[{"expression":"false","name":"none"}]')]


def test_a_missing_configuration_lists_the_webhooks_it_should_hold() -> None:
    found = registered(rendered(None, SERVED))
    found[VALIDATING] = None
    assert problems(rendered(), found) == [Problem(
        MISSING_CONFIGURATION, VALIDATING,
        expected="validate-jobs.admitter.dev, validate-resources.admitter.dev")]


def test_a_ca_bundle_without_the_served_ca_names_both() -> None:
    found = problems(rendered(), registered(rendered(None, OLD)))
    assert {(p.kind, p.field) for p in found} == {(CA_BUNDLE, "clientConfig.caBundle")}
    assert len(found) == 4  # every webhook
    assert "CN=admitter-webhook-ca " in found[0].expected
    assert "CN=admitter-webhook-ca-previous" in found[0].found
    empty = problems(rendered(), registered(rendered()))
    assert {p.found for p in empty} == {"empty"}


def test_the_ca_is_not_checked_when_the_controller_does_not_know_it() -> None:
    assert problems(rendered(), registered(rendered()), served=None) == []


def test_the_endpoint_is_compared_only_when_the_controller_serves_the_webhooks() -> None:
    by_url = registered(rendered(None, SERVED, url_host="127.0.0.1:9443"))
    assert problems(rendered(), by_url, endpoint_known=False) == []
    found = problems(rendered(), by_url)
    assert {(p.field, p.expected) for p in found} == {
        ("clientConfig", '{"service":{"name":"admitter-webhook","namespace":"admitter-system",'
                         f'"path":"{path}","port":9443}}}}')
        for path in ("/mutate-jobs", "/mutate-pod-placement", "/validate-jobs",
                     "/validate-admitter")}


class Leader:
    def __init__(self) -> None:
        self.leading = False

    def __call__(self) -> bool:
        return self.leading


async def test_the_check_reports_in_gauge_log_and_leader_events_until_fixed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / CA_FILE).write_bytes(SERVED.cert_pem)
    api, metrics, leader = FakeApi(), Metrics(), Leader()
    check = InstallCheck(api, rendered(opt_in()), tmp_path,  # type: ignore[arg-type]
                         EventRecorder(api, "test"), metrics.install_problems, leader)

    def register(configurations: tuple[Obj, Obj]) -> None:
        for configuration in map(copy.deepcopy, configurations):  # their metadata is shared
            configuration["metadata"]["uid"] = f"uid-{configuration['kind']}"
            check.informers[configuration["kind"]].observe(configuration)

    def gauge() -> dict[str, float]:
        return {kind: metrics.registry.get_sample_value("admitter_install_problems",
                                                        {"kind": kind}) or 0.0
                for kind in PROBLEM_KINDS}

    register(rendered(None, SERVED))
    with caplog.at_level(logging.INFO):
        check.check(0.0)
    assert gauge()[MISSING_WEBHOOK] == 3
    assert sum(gauge().values()) == 3
    assert "webhook mutate-pods.admitter.dev is missing" in caplog.text
    assert api.events() == []  # followers only count and log

    leader.leading = True
    check.check(1.0)
    check.check(2.0)  # nothing new: no second Event
    await asyncio.gather(*check.events.sending)
    warnings = [(e["involvedObject"]["kind"], e["involvedObject"]["uid"], e["type"])
                for e in api.events()]
    assert warnings == [(MUTATING, f"uid-{MUTATING}", "Warning"),
                        (VALIDATING, f"uid-{VALIDATING}", "Warning")]
    assert "webhook validate-pods.admitter.dev is missing" in api.events()[1]["message"]
    assert "admitter webhooks --config" in api.events()[1]["message"]

    register(rendered(opt_in(), SERVED))
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert check.check(3.0) == []
    await asyncio.gather(*check.events.sending)
    assert sum(gauge().values()) == 0
    assert "match the settings" in caplog.text
    assert [(e["type"], e["reason"]) for e in api.events()[2:]] == [
        ("Normal", "WebhooksMatchSettings"), ("Normal", "WebhooksMatchSettings")]

