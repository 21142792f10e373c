"""deploy/helm/admitter renders, with default values, the objects of deploy/'s kustomization
(plus the certificate Secret and CA bundle it makes), and its webhooks are those of
admitter/webhook/registration.py for the same settings: the chart cannot drift from deploy/."""

from __future__ import annotations

import base64

import pytest
import yaml
from cryptography import x509
from test_manifests import MANIFESTS

from admitter.api.settings import Settings
from admitter.kube.names import SECRET, WEBHOOK_CONFIGURATION
from admitter.kube.objects import Obj
from admitter.testing.helm_chart import ChartError, comparable, render
from admitter.webhook.registration import service_client_config, settings_configurations

OPT_IN = {"namespaceSelector": {"matchLabels": {"admitter.dev/quota": "enforced"}},
          "localQueue": "shared"}


def kustomized() -> dict[tuple[str, str], Obj]:
    """deploy/'s objects as `kubectl kustomize deploy/` writes them (its `images` tag applied;
    tests/integration/test_helm_chart_on_cluster.py compares with kubectl's own output); the
    Namespace is left to `helm install --create-namespace`."""
    docs = comparable([d for d in MANIFESTS if d["kind"] != "Namespace"])
    for main in docs["Deployment", "admitter"]["spec"]["template"]["spec"]["containers"]:
        main["image"] += ":0.1.0"
    return docs


def test_the_default_chart_renders_deploys_objects_plus_the_certificate_secret():
    charted = comparable(render())
    assert charted.pop(("Secret", SECRET))["type"] == "kubernetes.io/tls"
    assert sorted(charted) == sorted(kustomized())
    for name, doc in kustomized().items():
        assert charted[name] == doc, name


def webhooks(docs: list[Obj]) -> list[Obj]:
    return [d for d in comparable(docs).values() if d["kind"].endswith("WebhookConfiguration")]


def test_the_opt_in_renders_the_settings_and_the_webhooks_registration_makes_for_them():
    docs = render({"settings": {"unlabelledWork": OPT_IN}})
    (config,) = [d for d in docs if d["kind"] == "ConfigMap"]
    settings = Settings.model_validate(yaml.safe_load(config["data"]["config.yaml"]))
    assert settings.unlabelled_work is not None
    assert settings.unlabelled_work.local_queue == "shared"
    expected = settings_configurations(service_client_config, settings)
    assert webhooks(docs) == list(expected)
    assert len(expected[0]["webhooks"]) + len(expected[1]["webhooks"]) == 7


def test_domain_placement_registers_no_placement_webhook():
    docs = render({"settings": {"podPlacement": "Domain"}})
    (config,) = [d for d in docs if d["kind"] == "ConfigMap"]
    settings = Settings.model_validate(yaml.safe_load(config["data"]["config.yaml"]))
    assert settings.pod_placement == "Domain"
    expected = settings_configurations(service_client_config, settings)
    assert webhooks(docs) == list(expected)
    assert "gate-pods.admitter.dev" not in {h["name"] for h in expected[0]["webhooks"]}


def test_the_rules_policies_are_values_merged_over_their_defaults():
    docs = render({"settings": {"shortJobs": {"maxMinRuntime": "30m"},
                                "timeSlicing": {"swapMargin": 0.1}}})
    (config,) = [d for d in docs if d["kind"] == "ConfigMap"]
    settings = Settings.model_validate(yaml.safe_load(config["data"]["config.yaml"]))
    assert (settings.short_jobs.max_min_runtime, settings.short_jobs.max_gpus) == (1800.0, 4)
    assert (settings.time_slicing.swap_margin, settings.time_slicing.non_resumable_gap) == (
        0.1, 9.0)


def test_the_generated_certificate_is_for_the_service_and_signed_by_the_bundle():
    docs = render(namespace="gpu-admission")
    secret = comparable(docs)["Secret", SECRET]
    data = {name: base64.b64decode(value) for name, value in secret["data"].items()}
    authority = x509.load_pem_x509_certificate(data["ca.crt"])
    served = x509.load_pem_x509_certificate(data["tls.crt"])
    served.verify_directly_issued_by(authority)
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "admitter-webhook.gpu-admission.svc" in names.get_values_for_type(x509.DNSName)
    configurations = [d for d in docs if d["kind"].endswith("WebhookConfiguration")]
    bundles = {hook["clientConfig"]["caBundle"] for d in configurations for hook in d["webhooks"]}
    assert bundles == {secret["data"]["ca.crt"]}


def test_another_namespace_names_the_controller_so_its_unsuspends_pass_the_webhook():
    docs = render(namespace="gpu-admission")
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (main,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--controller-username=system:serviceaccount:gpu-admission:admitter" in main["args"]
    for config in webhooks(docs):
        assert {h["clientConfig"]["service"]["namespace"] for h in config["webhooks"]} == {
            "gpu-admission"}


def test_cert_manager_issues_the_certificate_and_injects_the_bundle():
    docs = render({"certManager": {"enabled": True}})
    kinds = set(comparable(docs))
    assert {("Issuer", "admitter-selfsigned"), ("Certificate", "admitter-webhook")} <= kinds
    assert ("Secret", SECRET) not in kinds
    for config in webhooks(docs):
        assert config["metadata"]["name"] == WEBHOOK_CONFIGURATION
        assert config["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "admitter-system/admitter-webhook"}
        assert all("caBundle" not in h["clientConfig"] for h in config["webhooks"])


def test_metrics_service_and_service_monitor_are_opt_in():
    assert not {d["kind"] for d in render()} & {"ServiceMonitor"}
    docs = render({"metrics": {"service": {"enabled": True},
                               "serviceMonitor": {"enabled": True}}})
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    metrics = comparable(docs)["Service", "admitter-metrics"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= metrics["metadata"][
        "labels"].items()


@pytest.mark.parametrize("values, complaint", [
    ({"settings": {"unlabelledWork": {"namespaceSelector": {}}}},
     "settings.unlabelledWork.namespaceSelector"),
    ({"podAntiAffinity": "always"}, 'podAntiAffinity: "always" is not one of'),
    ({"metrics": {"serviceMonitor": {"enabled": True}}}, "metrics.service.enabled"),
])
def test_bad_values_are_refused_naming_the_value(values, complaint):
    with pytest.raises(ChartError, match=complaint):
        render(values)


def test_the_clusterqueue_viewer_is_bound_only_to_the_groups_named():
    assert ("ClusterRoleBinding", "admitter-clusterqueue-viewer") not in comparable(render())
    groups = ["system:authenticated", "researchers"]
    binding = comparable(render({"clusterQueueViewer": {"groups": groups}}))[
        "ClusterRoleBinding", "admitter-clusterqueue-viewer"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": "admitter-clusterqueue-viewer"}
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}
        for group in groups]

