"""Every manifest under deploy/ parses and agrees with the code: kinds, RBAC verbs, webhook
routes and names, the settings, the generated CRDs and a sample tree the webhooks would admit."""

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from admitter.api.base import GROUP
from admitter.api.clusterqueue import ClusterQueue
from admitter.api.contract import QUEUE_LABEL
from admitter.api.convert import core_queue
from admitter.api.crds import render_crds
from admitter.api.localqueue import LocalQueue
from admitter.api.settings import Settings
from admitter.api.topology import Topology
from admitter.cli import build_parser
from admitter.core.queue_tree import QueueTree
from admitter.kube import names
from admitter.kube.objects import POD_SET_LABEL
from admitter.webhook.registration import (
    service_client_config,
    url_client_config,
    webhook_configurations,
)
from admitter.webhook.resources import KINDS
from admitter.webhook.server import build_app

DEPLOY = Path(__file__).parents[2] / "deploy"
NAMESPACED_KINDS = {
    "ConfigMap",
    "Deployment",
    "PodDisruptionBudget",
    "Role",
    "RoleBinding",
    "Service",
    "ServiceAccount",
}
KNOWN_KINDS = NAMESPACED_KINDS | {
    "ClusterQueue",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "LocalQueue",
    "MutatingWebhookConfiguration",
    "Namespace",
    "Topology",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration",
}


def documents(directory: Path) -> list[dict[str, Any]]:
    """Every object listed by the kustomization in `directory`, in order."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    docs = []
    for resource in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((directory / resource).read_text()) if d]
    return docs


MANIFESTS = documents(DEPLOY)
SAMPLES = documents(DEPLOY / "samples")
USER_ROLES = [d for d in yaml.safe_load_all((DEPLOY / "user-roles.yaml").read_text()) if d]
CONTROLLER_MANIFESTS = [d for d in MANIFESTS if d not in USER_ROLES]
"""The controller's own objects: the roles for people are checked apart."""


def only(kind: str, docs: list[dict[str, Any]] = CONTROLLER_MANIFESTS) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def container() -> dict[str, Any]:
    (main,) = only("Deployment")["spec"]["template"]["spec"]["containers"]
    return main


def test_every_yaml_file_is_listed_by_a_kustomization_and_every_kind_is_known():
    listed = set()
    for directory in (DEPLOY, DEPLOY / "samples", DEPLOY / "fleet-worker"):
        kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
        listed |= {(directory / r).resolve() for r in kustomization["resources"]}
        listed.add((directory / "kustomization.yaml").resolve())
    chart = DEPLOY / "helm"  # rendered by Helm: tests/deploy/test_helm_chart.py
    assert {p.resolve() for p in DEPLOY.rglob("*.yaml") if chart not in p.parents} == listed
    for doc in MANIFESTS + SAMPLES:
        assert doc["kind"] in KNOWN_KINDS, doc["kind"]
        assert doc["metadata"]["name"]


@pytest.mark.parametrize("crds_dir", [DEPLOY / "crds", DEPLOY / "helm" / "admitter" / "crds"])
def test_deploy_crds_match_the_generated_ones(crds_dir):
    assert {p.name: p.read_text() for p in crds_dir.iterdir()} == render_crds(), (
        f"{crds_dir} is stale: run `admitter crds --out {crds_dir.relative_to(DEPLOY.parent)}`"
    )


def test_namespaced_objects_live_in_admitters_namespace():
    assert only("Namespace")["metadata"]["name"] == names.NAMESPACE
    for doc in MANIFESTS:
        if doc["kind"] in NAMESPACED_KINDS:
            assert doc["metadata"]["namespace"] == names.NAMESPACE, doc["kind"]


def test_the_cluster_role_names_no_wildcard_and_only_reads_webhook_configurations():
    rules = only("ClusterRole")["rules"]
    assert "*" not in str(rules)
    registrations = [rule for rule in rules if "admissionregistration.k8s.io" in rule["apiGroups"]]
    assert registrations == [{
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
        "verbs": ["list", "watch"],  # the install check's informers; never a write
    }]


def test_both_roles_are_bound_to_the_controllers_service_account():
    account = only("ServiceAccount")["metadata"]
    assert f"system:serviceaccount:{account['namespace']}:{account['name']}" == (
        names.CONTROLLER_USERNAME
    )
    for kind, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = only(kind)
        assert binding["roleRef"]["name"] == only(role)["metadata"]["name"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
        ]
    assert only("Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == account["name"]


def test_the_leader_fence_is_bound_to_the_lease_the_deployment_elects_with():
    """deploy/leader-fence.yaml reads the Lease the controller runs with by default, in its
    namespace, and checks Workloads of admitter's own API group."""
    args = build_parser().parse_args(["run"])
    deployment_args = container()["args"]
    assert not any(a.split("=")[0] == "--lease-name" for a in deployment_args)
    assert "--lease-namespace=$(POD_NAMESPACE)" in deployment_args
    binding = only("ValidatingAdmissionPolicyBinding")["spec"]
    assert binding["policyName"] == only("ValidatingAdmissionPolicy")["metadata"]["name"]
    assert (binding["paramRef"]["name"], binding["paramRef"]["namespace"]) == (
        args.lease_name, names.NAMESPACE)
    (rule,) = only("ValidatingAdmissionPolicy")["spec"]["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == [GROUP] and "workloads/status" in rule["resources"]


def webhooks() -> list[dict[str, Any]]:
    return [
        hook
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for hook in only(kind)["webhooks"]
    ]


def test_webhook_paths_are_routes_of_the_server_reached_through_the_service():
    app = build_app(Settings(), lookup=None)  # routes only: no request is served
    routes = {resource.canonical for resource in app.router.resources()}
    ports = {p["name"]: p["port"] for p in only("Service")["spec"]["ports"]}
    paths = []
    for hook in webhooks():
        service = hook["clientConfig"]["service"]
        assert (service["name"], service["namespace"]) == (names.SERVICE, names.NAMESPACE)
        assert service["port"] == ports["webhook"]
        assert "caBundle" not in hook["clientConfig"], "apply would reset the patched bundle"
        paths.append(service["path"])
    assert sorted(paths) == sorted(
        [names.MUTATE_JOBS_PATH, names.VALIDATE_JOBS_PATH, names.VALIDATE_RESOURCES_PATH,
         names.GATE_PODS_PATH]
    )
    assert set(paths) <= routes
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert only(kind)["metadata"]["name"] == names.WEBHOOK_CONFIGURATION


def test_job_webhooks_fail_closed_and_only_see_labelled_jobs():
    for hook in webhooks():
        if hook["rules"][0]["resources"] == ["pods"]:
            continue  # the placement webhook: below
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        if hook["rules"][0]["resources"] == ["jobs"]:
            assert hook["objectSelector"] == {
                "matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]
            }


def test_the_placement_webhook_fails_open_and_only_sees_pods_of_started_jobs():
    """Placement is not quota: while admitter is down, pods start ungated rather than not at
    all; and only pods whose template admitter labelled with their pod set reach it."""
    (hook,) = [h for h in webhooks() if h["rules"][0]["resources"] == ["pods"]]
    assert hook["clientConfig"]["service"]["path"] == names.GATE_PODS_PATH
    assert hook["failurePolicy"] == "Ignore"
    assert hook["rules"][0]["operations"] == ["CREATE"]
    assert hook["objectSelector"] == {
        "matchExpressions": [{"key": POD_SET_LABEL, "operator": "Exists"}]}
    assert hook["timeoutSeconds"] < 5


def test_the_resource_webhook_covers_exactly_the_validated_kinds():
    path = names.VALIDATE_RESOURCES_PATH
    (hook,) = [h for h in webhooks() if h["clientConfig"]["service"]["path"] == path]
    writes, deletes = hook["rules"]
    assert sorted(writes["resources"]) == sorted(kind.plural for kind in KINDS.values())
    assert writes["operations"] == ["CREATE", "UPDATE"]
    # DELETE reaches the handler for parent ClusterQueues only: every other delete goes through.
    assert (deletes["resources"], deletes["operations"]) == (["clusterqueues"], ["DELETE"])


def test_the_config_map_holds_valid_settings_with_every_knob_spelled_out():
    text = only("ConfigMap")["data"]["config.yaml"]
    data = yaml.safe_load(text)
    settings = Settings.model_validate(data)
    assert settings == Settings()  # the shipped values are the defaults, written out
    assert set(data) == {field.alias for field in Settings.model_fields.values()}


def test_the_deployment_runs_two_leader_electing_replicas_with_probes_and_mounts():
    deployment = only("Deployment")
    assert deployment["spec"]["replicas"] == 2
    main = container()
    args = main["args"]
    assert args[0] == "run" and "--leader-elect" in args
    assert "--config=/etc/admitter/config.yaml" in args
    parsed = build_parser().parse_args(args)  # the controller accepts exactly these flags
    assert parsed.leader_elect and parsed.webhook_cert_dir
    ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    assert ports == {"webhook": 9443, "metrics": 8080}
    assert f"--webhook-address=0.0.0.0:{ports['webhook']}" in args
    assert f"--metrics-address=0.0.0.0:{ports['metrics']}" in args
    assert "--lease-namespace=$(POD_NAMESPACE)" in args and "--identity=$(POD_NAME)" in args
    assert {e["name"] for e in main["env"]} == {"POD_NAME", "POD_NAMESPACE"}
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    mounts = {m["name"]: m["mountPath"] for m in main["volumeMounts"]}
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == names.SECRET
    assert f"--webhook-cert-dir={mounts['tls']}" in args
    assert volumes["config"]["configMap"]["name"] == only("ConfigMap")["metadata"]["name"]
    assert mounts["config"] == "/etc/admitter/config.yaml"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert only("Service")["spec"]["selector"].items() <= labels.items()


def test_the_samples_form_a_tree_with_local_queues_on_leaves():
    queues = [ClusterQueue.model_validate(d) for d in SAMPLES if d["kind"] == "ClusterQueue"]
    tree = QueueTree(core_queue(q.metadata.name, q.spec, i) for i, q in enumerate(queues))
    local = [LocalQueue.model_validate(d) for d in SAMPLES if d["kind"] == "LocalQueue"]
    namespaces = {d["metadata"]["name"] for d in SAMPLES if d["kind"] == "Namespace"}
    assert local
    for queue in local:
        tree.validate_leaf(queue.spec.cluster_queue)
        assert queue.metadata.namespace in namespaces
    Topology.model_validate(only("Topology", SAMPLES))


@pytest.mark.parametrize("docs", [MANIFESTS, SAMPLES], ids=["deploy", "samples"])
def test_no_object_is_defined_twice(docs):
    keys = Counter(
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs
    )
    assert [key for key, count in keys.items() if count > 1] == []


def test_the_webhook_manifests_are_the_codes_configurations_pointed_at_the_service():
    """`admitter run --webhook-url-host` registers the same webhooks by URL."""
    manifests = list(yaml.safe_load_all((DEPLOY / "webhooks.yaml").read_text()))
    assert manifests == list(webhook_configurations(service_client_config))


def test_url_configurations_differ_only_in_where_they_call():
    by_service = webhook_configurations(service_client_config)
    by_url = webhook_configurations(url_client_config("10.0.0.5:9443", b"PEM"))
    for service, url in zip(by_service, by_url, strict=True):
        for hook_s, hook_u in zip(service["webhooks"], url["webhooks"], strict=True):
            path = hook_s["clientConfig"]["service"]["path"]
            assert hook_u["clientConfig"] == {"url": f"https://10.0.0.5:9443{path}",
                                              "caBundle": "UEVN"}
            assert {**hook_u, "clientConfig": None} == {**hook_s, "clientConfig": None}
