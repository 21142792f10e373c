"""`admitter webhooks` renders the configurations from the settings: the opt-in webhooks appear
exactly when `unlabelledWork` is set, with its selector, and a CA bundle reaches every hook."""

import base64

import pytest
import yaml

from admitter.api.settings import Settings
from admitter.cli import main
from admitter.webhook.registration import service_client_config, webhook_configurations

OPT_IN = """
unlabelledWork:
  namespaceSelector:
    matchLabels: {admitter.dev/quota: enforced}
  localQueue: default
"""


def rendered(capsys, *argv: str) -> list[dict]:
    assert main(["webhooks", *argv]) == 0
    return list(yaml.safe_load_all(capsys.readouterr().out))


def hook_names(configurations: list[dict]) -> set[str]:
    return {hook["name"] for c in configurations for hook in c["webhooks"]}


def test_without_settings_it_is_the_kustomize_copy_and_has_no_opt_in_hooks(capsys):
    assert rendered(capsys) == list(webhook_configurations(service_client_config))


def test_unlabelled_work_adds_its_webhooks_with_its_namespace_selector(tmp_path, capsys):
    settings = tmp_path / "settings.yaml"
    settings.write_text(OPT_IN)
    plain = hook_names(rendered(capsys))
    opted = rendered(capsys, "--config", str(settings))
    assert hook_names(opted) - plain == {"mutate-unlabelled-jobs.admitter.dev",
                                         "mutate-pods.admitter.dev", "validate-pods.admitter.dev"}
    expected = Settings.model_validate(yaml.safe_load(OPT_IN)).unlabelled_work
    assert expected is not None
    selectors = [hook["namespaceSelector"] for c in opted for hook in c["webhooks"]
                 if hook["name"] not in plain]
    assert selectors == [expected.webhook_namespace_selector()] * 3


def test_a_ca_bundle_reaches_every_hook_in_service_and_url_form(tmp_path, capsys):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    bundle = base64.b64encode(ca.read_bytes()).decode()
    for extra in ([], ["--url-host", "10.0.0.5:9443"]):
        configurations = rendered(capsys, "--ca-file", str(ca), *extra)
        configs = [hook["clientConfig"] for c in configurations for hook in c["webhooks"]]
        assert {c["caBundle"] for c in configs} == {bundle}
        assert all(("url" in c) == bool(extra) for c in configs)


@pytest.mark.parametrize(("argv", "named"), [
    (["--url-host", "10.0.0.5:9443"], "--url-host"),
    (["--ca-file", "/nonexistent/ca.pem"], "--ca-file"),
])
def test_bad_input_names_the_flag(argv, named, capsys):
    assert main(["webhooks", *argv]) == 2
    assert capsys.readouterr().err.startswith(named)
