"""The webhooks through the real API server: admitter's server runs on 127.0.0.1 with a CA from
`admitter certs`, registered from deploy/webhooks.yaml with a url instead of the Service and
its caBundle installed by `admitter certs --patch`'s code. A user identity (client certificate
from the cluster CA, allowed to edit Jobs) plays the researcher; the admin plays the controller.
Also: deploy/ applies to the API server and its RBAC grants what it should, nothing more."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import secrets
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from admitter import pki
from admitter.api import yaml_text
from admitter.api.base import GROUP, VERSION
from admitter.api.contract import QUEUE_LABEL
from admitter.api.settings import Settings
from admitter.cli import main
from admitter.commands.certs import install, mint, write
from admitter.kube.names import CONTROLLER_USERNAME, NAMESPACE, SECRET
from admitter.testing import LocalCluster
from admitter.testing.waiting import eventually
from admitter.webhook.jobs import ADMITTED_WORKLOAD_ANNOTATION
from admitter.webhook.lookup import ApiLookup
from admitter.webhook.server import start_webhook_server

from builders.kube import JobWrapper

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).parents[2] / "deploy"
ADMIN = "admitter-admin"  # the launcher's admin identity stands in for the controller
USER = "alice"
TEST_LABEL = "admitter.dev/test-run"


@pytest.fixture(scope="module")
def crds(local_cluster: LocalCluster) -> None:
    local_cluster.kubectl("apply", "-f", str(DEPLOY / "crds"))
    local_cluster.wait_established()
    # Established is not yet served: a list answers 429 "storage is (re)initializing" until
    # the watch cache is filled, and kubectl retries that, so this returns once lists work
    # (the webhooks' first lookups would otherwise be refused).
    local_cluster.kubectl("get", "clusterqueues,localqueues,topologies,workloads", "-A")


def local_webhook_configurations(name: str, base_url: str, namespace: str) -> list[dict[str, Any]]:
    """deploy/webhooks.yaml pointed at `base_url`, limited to this test's objects."""
    configurations = list(yaml.safe_load_all((DEPLOY / "webhooks.yaml").read_text()))
    for configuration in configurations:
        configuration["metadata"]["name"] = name
        for hook in configuration["webhooks"]:
            hook["clientConfig"] = {"url": base_url + hook["clientConfig"]["service"]["path"]}
            if hook["rules"][0]["resources"] == ["jobs"]:
                hook["namespaceSelector"] = {
                    "matchLabels": {"kubernetes.io/metadata.name": namespace}
                }
            else:  # cluster-scoped queues: only the ones this test labels
                hook["objectSelector"] = {"matchLabels": {TEST_LABEL: namespace}}
    return configurations


def job(name: str, namespace: str, queue: str | None) -> dict[str, Any]:
    """A CPU-only Job as a user writes it, not suspended: the webhooks are what suspend it."""
    return (JobWrapper(name, namespace).queue(queue).gpus(0).min_runtime(None).suspend(False)
            .obj())


def denial(error: pytest.ExceptionInfo[ApiException]) -> str:
    return json.loads(error.value.body)["message"]


@pytest.fixture
async def webhooks(
    crds: None, kube_client: client.ApiClient, namespace: str, tmp_path: Path
) -> AsyncIterator[None]:
    """admitter's webhooks serving this test's namespace, with LocalQueue `default` in it."""
    certs = mint("admitter-webhook", NAMESPACE, dt.timedelta(hours=1))
    write(certs, tmp_path)
    runner = await start_webhook_server(
        Settings(), ApiLookup(kube_client), tmp_path, 0, host="127.0.0.1",
        controller_usernames=[ADMIN],
    )
    port = runner.addresses[0][1]
    registration = client.AdmissionregistrationV1Api(kube_client)
    name = f"admitter-webhook-{namespace}"
    mutating, validating = local_webhook_configurations(
        name, f"https://127.0.0.1:{port}", namespace
    )
    objects = client.CustomObjectsApi(kube_client)
    await objects.create_namespaced_custom_object(GROUP, VERSION, namespace, "localqueues", {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LocalQueue",
        "metadata": {"name": "default"},
        "spec": {"clusterQueue": "team-a"},
    })
    await registration.create_mutating_webhook_configuration(mutating)
    await registration.create_validating_webhook_configuration(validating)
    try:
        await install(kube_client, certs, namespace, SECRET, name)
        await eventually(lambda: webhooks_answer(kube_client, namespace), "webhooks in effect")
        yield
    finally:
        await registration.delete_mutating_webhook_configuration(name)
        await registration.delete_validating_webhook_configuration(name)
        await runner.cleanup()


async def webhooks_answer(kube_client: client.ApiClient, namespace: str) -> bool:
    """Both webhooks are called: a dry run comes back suspended, a missing queue is denied.
    Not yet while the webhook cannot read the queues (it denies, failing closed, while the API
    server's storage for a just-installed CRD is still initializing)."""
    batch = client.BatchV1Api(kube_client)
    try:
        created = await batch.create_namespaced_job(
            namespace, job("probe", namespace, "default"), dry_run="All"
        )
    except ApiException as error:
        if "could not check this request" in str(error.body):
            return False
        raise
    try:
        await batch.create_namespaced_job(namespace, job("probe", namespace, "missing"),
                                          dry_run="All")
    except ApiException as error:
        return created.spec.suspend is True and error.status == 422
    return False


@pytest.fixture
async def user_client(
    local_cluster: LocalCluster, kube_client: client.ApiClient, namespace: str
) -> AsyncIterator[client.ApiClient]:
    """`alice`, allowed everything on Jobs in the test namespace, nothing else.

    (The built-in `edit` role is empty here: the local control plane runs no aggregation
    controller.)"""
    ca_dir = local_cluster.ca_path.parent
    ca = pki.CertKey(
        x509.load_pem_x509_certificate(local_cluster.ca_path.read_bytes()),
        serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), None),
    )
    alice = pki.client_cert(ca, USER)
    kubeconfig = yaml.safe_load(local_cluster.kubeconfig_path.read_text())
    kubeconfig["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(alice.cert_pem).decode(),
        "client-key-data": base64.b64encode(alice.key_pem).decode(),
    }
    rbac = client.RbacAuthorizationV1Api(kube_client)
    await rbac.create_namespaced_role(namespace, {
        "metadata": {"name": "job-editor"},
        "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]}],
    })
    await rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "alice-edits-jobs"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "job-editor"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    })
    api = await config.new_client_from_config_dict(kubeconfig)
    async with api:
        yield api


async def test_a_labelled_job_is_created_suspended_and_an_unlabelled_one_untouched(
    webhooks: None, user_client: client.ApiClient, namespace: str
) -> None:
    batch = client.BatchV1Api(user_client)
    created = await batch.create_namespaced_job(namespace, job("train", namespace, "default"))
    assert created.spec.suspend is True
    plain = job("plain", namespace, None)
    untouched = await batch.create_namespaced_job(namespace, plain, dry_run="All")
    assert untouched.spec.suspend is False


async def test_a_job_naming_a_missing_local_queue_is_denied_with_the_message(
    webhooks: None, user_client: client.ApiClient, namespace: str
) -> None:
    batch = client.BatchV1Api(user_client)
    with pytest.raises(ApiException) as error:
        await batch.create_namespaced_job(namespace, job("train", namespace, "nope"))
    assert error.value.status == 422
    message = denial(error)
    assert 'admission webhook "validate-jobs.admitter.dev" denied the request' in message
    assert (
        f"metadata.labels[{QUEUE_LABEL}]: LocalQueue 'nope' does not exist in namespace "
        f"'{namespace}'; name one that does (existing: default)"
    ) in message


async def test_only_admitter_unsuspends_and_an_admitted_job_cannot_change_queues(
    webhooks: None, user_client: client.ApiClient, kube_client: client.ApiClient, namespace: str
) -> None:
    as_user, as_admitter = client.BatchV1Api(user_client), client.BatchV1Api(kube_client)
    await as_user.create_namespaced_job(namespace, job("train", namespace, "default"))

    with pytest.raises(ApiException) as error:
        await as_user.patch_namespaced_job("train", namespace, {"spec": {"suspend": False}})
    assert "spec.suspend: alice may not unsuspend a Job that admitter has not admitted" in (
        denial(error)
    )

    admit = {
        "metadata": {"annotations": {ADMITTED_WORKLOAD_ANNOTATION: "job-train"}},
        "spec": {"suspend": False},
    }
    admitted = await as_admitter.patch_namespaced_job("train", namespace, admit)
    assert admitted.spec.suspend is False

    relabel = {"metadata": {"labels": {QUEUE_LABEL: "other"}}}
    with pytest.raises(ApiException) as error:
        await as_user.patch_namespaced_job("train", namespace, relabel)
    assert "admitted to LocalQueue 'default' and cannot move to 'other'" in denial(error)


async def test_admitter_objects_are_validated_with_field_paths(
    webhooks: None, kube_client: client.ApiClient, namespace: str
) -> None:
    objects = client.CustomObjectsApi(kube_client)
    labels = {TEST_LABEL: namespace}
    with pytest.raises(ApiException) as error:
        await objects.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ClusterQueue",
            "metadata": {"name": f"orphan-{namespace}", "labels": labels},
            "spec": {"parent": "nowhere"},
        })
    assert "spec.parent: ClusterQueue 'nowhere' does not exist" in denial(error)
    with pytest.raises(ApiException) as error:
        await objects.create_namespaced_custom_object(GROUP, VERSION, namespace, "localqueues", {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "LocalQueue",
            "metadata": {"name": "lost", "labels": labels},
            "spec": {"clusterQueue": f"missing-{secrets.token_hex(3)}"},
        })
    assert "spec.clusterQueue: ClusterQueue 'missing-" in denial(error)


async def test_a_queues_run_time_ceiling_refuses_a_longer_job_and_its_default_is_written(
    webhooks: None, user_client: client.ApiClient, kube_client: client.ApiClient, namespace: str
) -> None:
    objects = client.CustomObjectsApi(kube_client)
    capped = f"capped-{namespace}"
    await objects.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue",
        "metadata": {"name": capped, "labels": {TEST_LABEL: namespace}},
        "spec": {"maxRuntimeCeiling": "1h", "defaultMaxRuntime": "30m"},
    })
    try:
        await objects.create_namespaced_custom_object(GROUP, VERSION, namespace, "localqueues", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue",
            "metadata": {"name": "capped"}, "spec": {"clusterQueue": capped},
        })
        batch = client.BatchV1Api(user_client)
        longer = job("long", namespace, "capped")
        longer["metadata"]["annotations"] = {"admitter.dev/max-runtime": "2h"}
        with pytest.raises(ApiException) as error:
            await batch.create_namespaced_job(namespace, longer)
        assert error.value.status == 422
        assert ("annotation admitter.dev/max-runtime='2h' is above the queue's "
                "maxRuntimeCeiling 1h; ask for at most that") in denial(error)
        created = await batch.create_namespaced_job(namespace, job("plain", namespace, "capped"))
        assert created.metadata.annotations["admitter.dev/max-runtime"] == "30m"
    finally:
        await objects.delete_cluster_custom_object(GROUP, VERSION, "clusterqueues", capped)


def test_certs_patch_before_deploy_says_to_apply_deploy_first(
    kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["certs", "--out", str(tmp_path), "--patch", "--kubeconfig", str(kubeconfig)])
    assert code == 1
    err = capsys.readouterr().err
    assert "HTTP 404" in err and "apply deploy/ first" in err
    assert (tmp_path / "tls.crt").exists()


# ---- deploy/ against the API server --------------------------------------------------------


@pytest.fixture(scope="module")
def deployed(local_cluster: LocalCluster, crds: None) -> Iterator[list[dict[str, Any]]]:
    """deploy/ built by kubectl's kustomize; applied except what would act on the cluster."""
    built = local_cluster.kubectl("kustomize", str(DEPLOY)).stdout
    docs = [d for d in yaml.safe_load_all(built) if d]
    acting = ("Deployment", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    inert = [d for d in docs if d["kind"] not in acting and d["kind"] != "CustomResourceDefinition"]
    apply(local_cluster, inert)
    yield docs
    kubectl_stdin(local_cluster, inert, "delete", "--wait=false", "--ignore-not-found")


def apply(cluster: LocalCluster, docs: list[dict[str, Any]], *extra: str) -> str:
    return kubectl_stdin(cluster, docs, "apply", *extra)


def kubectl_stdin(cluster: LocalCluster, docs: list[dict[str, Any]], *args: str) -> str:
    """`kubectl ARGS -f -` with `docs` on stdin."""
    argv = [str(cluster.binaries.kubectl), "--kubeconfig", str(cluster.kubeconfig_path), *args]
    result = subprocess.run(
        [*argv, "-f", "-"], input=yaml_text.dump_all(docs), capture_output=True, text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_deploy_applies_and_the_rest_passes_a_server_dry_run(
    local_cluster: LocalCluster, deployed: list[dict[str, Any]]
) -> None:
    acting = [d for d in deployed if d["kind"] in (
        "Deployment", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"
    )]
    out = apply(local_cluster, acting, "--dry-run=server")
    assert "deployment.apps/admitter created (server dry run)" in out
    assert "validatingwebhookconfiguration.admissionregistration.k8s.io/admitter-webhook" in out


def test_samples_are_accepted_by_the_crd_schemas(
    local_cluster: LocalCluster, deployed: list[dict[str, Any]], namespace: str
) -> None:
    built = local_cluster.kubectl("kustomize", str(DEPLOY / "samples")).stdout
    samples = []
    for doc in yaml.safe_load_all(built):
        if doc["kind"] == "Namespace":
            continue
        doc = copy.deepcopy(doc)
        if "namespace" in doc["metadata"]:
            doc["metadata"]["namespace"] = namespace
        samples.append(doc)
    out = apply(local_cluster, samples, "--dry-run=server")
    # The cluster is shared by the session: a sample another test created comes back
    # "unchanged" (or "configured", if that test made it differently), which also means the
    # schema accepted it.
    accepted = sum(out.count(f"{verdict} (server dry run)")
                   for verdict in ("created", "unchanged", "configured"))
    assert accepted == len(samples), out


@pytest.mark.parametrize(
    "verb, resource, where, allowed",
    [
        ("patch", "jobs", "--all-namespaces", True),
        ("delete", "jobs", "--all-namespaces", False),
        ("create", "pods", "--all-namespaces", False),
        # `resource/name` would be a Workload named status: subresources need the flag.
        ("patch", "workloads.admitter.dev", "--subresource=status", True),
        ("update", "workloads.admitter.dev", "--subresource=status", False),
        ("patch", "clusterqueues.admitter.dev", "--subresource=status", True),
        ("update", "localqueues.admitter.dev", "--subresource=status", False),
        ("update", "jobs", "--all-namespaces", False),
        ("delete", "workloads.admitter.dev", "--all-namespaces", True),  # a changed Job's
        ("create", "events.events.k8s.io", "--all-namespaces", False),
        ("delete", "clusterqueues.admitter.dev", "--all-namespaces", False),
        ("patch", "clusterqueues.admitter.dev", "--all-namespaces", True),  # finalizer
        ("patch", "localqueues.admitter.dev", "--all-namespaces", True),
        ("patch", "topologies.admitter.dev", "--all-namespaces", False),
        ("create", "leases.coordination.k8s.io", f"--namespace={NAMESPACE}", True),
        ("create", "leases.coordination.k8s.io", "--namespace=default", False),
        ("patch", "validatingwebhookconfigurations/admitter-webhook", "", False),
        ("update", "mutatingwebhookconfigurations/admitter-webhook", "", False),
        ("watch", "validatingwebhookconfigurations", "", True),  # the install check
        ("list", "mutatingwebhookconfigurations", "", True),
        ("patch", "validatingwebhookconfigurations/someone-else", "", False),
        ("get", "secrets", "--all-namespaces", False),
    ],
)
def test_the_service_account_may_do_exactly_what_the_controller_needs(
    local_cluster: LocalCluster, deployed: list[dict[str, Any]],
    verb: str, resource: str, where: str, allowed: bool,
) -> None:
    args = ["auth", "can-i", verb, resource, f"--as={CONTROLLER_USERNAME}"]
    result = local_cluster.kubectl(*args, *([where] if where else []), check=False)
    assert result.stdout.strip() == ("yes" if allowed else "no"), result.stderr
