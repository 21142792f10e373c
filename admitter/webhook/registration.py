"""The webhook configurations, in one place: `deploy/webhooks.yaml` is them pointed at the
in-cluster Service (a test keeps the two equal), and `admitter run --webhook-url-host` writes
them pointed at a URL, for a controller running outside the cluster (a laptop, the local
control plane of `make demo`), with the CA bundle of its serving certificate."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.contract import QUEUE_LABEL
from admitter.api.settings import Settings, UnlabelledWork
from admitter.jobs.registry import SUSPENDABLE
from admitter.kube.names import (
    GATE_PODS_PATH,
    MUTATE_JOBS_PATH,
    MUTATE_PODS_PATH,
    NAMESPACE,
    SERVICE,
    VALIDATE_JOBS_PATH,
    VALIDATE_PODS_PATH,
    VALIDATE_RESOURCES_PATH,
    WEBHOOK_CONFIGURATION,
)
from admitter.kube.objects import POD_SET_LABEL, Obj

SERVICE_PORT = 9443
"""The port of the webhooks' Service (deploy/service.yaml): the one the server listens on
(`server.DEFAULT_PORT`), so a single number leads from the webhook configuration to the pod."""
TIMEOUT_SECONDS = 5
"""How long the API server waits for a webhook: half its default of 10 s, since every Job
creation waits on the call, and while admitter is unreachable a creation fails only after it;
the server answers within `DECISION_TIMEOUT`, a second less, so its own reason arrives before
the deadline."""
GATE_TIMEOUT_SECONDS = 2
"""How long the API server waits for the placement webhook, which reads nothing and answers
at once: while admitter is unreachable, each pod of a started job is created that much later
(ungated, `failurePolicy: Ignore`)."""
ClientConfig = Callable[[str], Obj]
"""The `clientConfig` of the webhook served at a path."""


def service_client_config(path: str) -> Obj:
    return {"service": {"name": SERVICE, "namespace": NAMESPACE, "path": path,
                        "port": SERVICE_PORT}}


def url_client_config(host_port: str, ca_pem: bytes) -> ClientConfig:
    """Calls to `https://HOST:PORT/<path>`, trusting `ca_pem`."""
    return endpoint_client_config(host_port, ca_pem)


def endpoint_client_config(url_host: str | None, ca_pem: bytes | None) -> ClientConfig:
    """Calls to `https://URL_HOST/<path>`, or else to the in-cluster Service; trusting
    `ca_pem` when given (`admitter webhooks` renders with it, the controller's install check
    compares with it)."""
    bundle = {} if ca_pem is None else {"caBundle": base64.b64encode(ca_pem).decode()}
    if url_host:
        return lambda path: {"url": f"https://{url_host}{path}", **bundle}
    return lambda path: {**service_client_config(path), **bundle}


def _hook(name: str, path: str, client_config: ClientConfig, rules: list[Obj],
          **extra: Any) -> Obj:
    return {
        "name": name,
        "clientConfig": client_config(path),
        "rules": rules,
        **extra,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        **({"reinvocationPolicy": "Never"} if path.startswith("/mutate") else {}),
        "timeoutSeconds": TIMEOUT_SECONDS,
    }


def webhook_configurations(client_config: ClientConfig,
                           unlabelled: UnlabelledWork | None = None,
                           place_pods: bool = True) -> tuple[Obj, Obj]:
    """The Mutating- and the ValidatingWebhookConfiguration, fail-closed (docs/webhooks.md);
    with `unlabelled`, the webhooks for unlabelled work in the namespaces it selects; with
    `place_pods` (`podPlacement: Node`), the placement webhook gating the pods of started
    jobs (docs/placement.md)."""
    # Unlabelled Jobs never reach admitter (unless their namespace opted in), so an outage
    # cannot touch them.
    queued = {"objectSelector": {"matchExpressions": [
        {"key": QUEUE_LABEL, "operator": "Exists"}]}}

    metadata = {"name": WEBHOOK_CONFIGURATION, "labels": {"app.kubernetes.io/name": "admitter"}}
    mutating: Obj = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [_hook("mutate-jobs.admitter.dev", MUTATE_JOBS_PATH, client_config,
                           job_rules("CREATE"), **queued)],
    }
    resources = {"apiGroups": ["admitter.dev"], "apiVersions": ["v1alpha1"],
                 "operations": ["CREATE", "UPDATE"],
                 "resources": ["clusterqueues", "localqueues", "topologies", "workloads"]}
    # A parent ClusterQueue cannot be deleted while it has children.
    deletions = {"apiGroups": ["admitter.dev"], "apiVersions": ["v1alpha1"],
                 "operations": ["DELETE"], "resources": ["clusterqueues"]}
    validating: Obj = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [
            _hook("validate-jobs.admitter.dev", VALIDATE_JOBS_PATH, client_config,
                  job_rules("CREATE", "UPDATE"), **queued),
            _hook("validate-resources.admitter.dev", VALIDATE_RESOURCES_PATH, client_config,
                  [resources, deletions]),
        ],
    }
    if place_pods:
        mutating["webhooks"].append(placement_hook(client_config))
    if unlabelled is not None:
        hooks = unlabelled_hooks(client_config, unlabelled)
        mutating["webhooks"] += hooks[:2]
        validating["webhooks"] += hooks[2:]
    return mutating, validating


def settings_configurations(client_config: ClientConfig, settings: Settings) -> tuple[Obj, Obj]:
    """The configurations `settings` need: the opt-in webhooks it asks for."""
    return webhook_configurations(client_config, settings.unlabelled_work,
                                  settings.pod_placement == "Node")


def placement_hook(client_config: ClientConfig) -> Obj:
    """The webhook gating each pod of a started queued job (its template labelled with its
    pod set) until admitter names its node. It fails open: placement is not quota (the job's
    admission is), so while admitter is unreachable the pods start ungated, kube-scheduler
    placing them in their domain, rather than not at all."""
    pod_sets = {"objectSelector": {"matchExpressions": [
        {"key": POD_SET_LABEL, "operator": "Exists"}]}}
    hook = _hook("gate-pods.admitter.dev", GATE_PODS_PATH, client_config,
                 [core("", "pods", "CREATE")], **pod_sets)
    return {**hook, "failurePolicy": "Ignore", "timeoutSeconds": GATE_TIMEOUT_SECONDS}


def unlabelled_hooks(client_config: ClientConfig, unlabelled: UnlabelledWork) -> list[Obj]:
    """Two mutating webhooks (unlabelled Jobs, Pods) and one validating (gated Pods), each
    limited to the selected namespaces: an outage touches no other namespace."""
    selected = {"namespaceSelector": unlabelled.webhook_namespace_selector()}
    unlabelled_jobs = {"objectSelector": {"matchExpressions": [
        {"key": QUEUE_LABEL, "operator": "DoesNotExist"}]}}
    queued_pods = {"objectSelector": {"matchExpressions": [
        {"key": QUEUE_LABEL, "operator": "Exists"}]}}
    return [
        _hook("mutate-unlabelled-jobs.admitter.dev", MUTATE_JOBS_PATH, client_config,
              [core("batch", "jobs", "CREATE")], **selected, **unlabelled_jobs),
        _hook("mutate-pods.admitter.dev", MUTATE_PODS_PATH, client_config,
              [core("", "pods", "CREATE")], **selected),
        _hook("validate-pods.admitter.dev", VALIDATE_PODS_PATH, client_config,
              [core("", "pods", "UPDATE")], **selected, **queued_pods),
    ]


def job_rules(*operations: str) -> list[Obj]:
    """A rule per kind admitter suspends (a JobSet's is inert while its CRD is not
    installed)."""
    rules = []
    for kind in SUSPENDABLE.values():
        group, _, version = kind.api_version.rpartition("/")
        rules.append({"apiGroups": [group], "apiVersions": [version],
                      "operations": list(operations), "resources": [kind.plural],
                      "scope": "Namespaced"})
    return rules


def core(group: str, resource: str, *operations: str) -> Obj:
    """A rule for one namespaced built-in resource."""
    return {"apiGroups": [group], "apiVersions": ["v1"], "operations": list(operations),
            "resources": [resource], "scope": "Namespaced"}


async def register_url_webhooks(api: client.ApiClient, host_port: str, ca_pem: bytes,
                                settings: Settings) -> None:
    """Create or replace both configurations `settings` need, pointed at `https://HOST:PORT`;
    call it once the server answers there (fail-closed webhooks that cannot be reached block
    queued Jobs)."""
    await register_webhook_configurations(
        api, *settings_configurations(url_client_config(host_port, ca_pem), settings))


def point_at_url(configuration: Obj, host_port: str, ca_pem: bytes) -> Obj:
    """A configuration pointed at the in-cluster Service (deploy/, the Helm chart) with each
    webhook's `clientConfig` turned into the URL of the same path, trusting `ca_pem`."""
    client_config = url_client_config(host_port, ca_pem)
    return {**configuration, "webhooks": [
        {**hook, "clientConfig": client_config(hook["clientConfig"]["service"]["path"])}
        for hook in configuration["webhooks"]]}


async def register_webhook_configurations(api: client.ApiClient, mutating: Obj,
                                          validating: Obj) -> None:
    """Create or replace the Mutating- and the ValidatingWebhookConfiguration."""
    registration = client.AdmissionregistrationV1Api(api)
    for body, read, create, replace in (
        (mutating, registration.read_mutating_webhook_configuration,
         registration.create_mutating_webhook_configuration,
         registration.replace_mutating_webhook_configuration),
        (validating, registration.read_validating_webhook_configuration,
         registration.create_validating_webhook_configuration,
         registration.replace_validating_webhook_configuration),
    ):
        try:
            current = await read(WEBHOOK_CONFIGURATION)
        except ApiException as error:
            if error.status != 404:
                raise
            creation: Any = body  # the client takes plain JSON as well as its models
            await create(creation)
            continue
        version = current.metadata.resource_version
        replacement: Any = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
        await replace(WEBHOOK_CONFIGURATION, replacement)
