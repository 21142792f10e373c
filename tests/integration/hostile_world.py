"""The world of the hostile-input test: a tenant allowed to write everything admitter
validates, admitter's webhooks as deploy/webhooks.yaml registers them (pointed at a server in
this process, limited to the test's objects), the controller as its own process, and a tree."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import datetime as dt
import http.client
import json
import secrets
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from admitter_world import ControllerProcess
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes_asyncio import config

from admitter import pki
from admitter.api.duration import format_duration
from admitter.api.settings import Settings
from admitter.commands.certs import mint, write
from admitter.kube import client as kube
from admitter.kube.names import NAMESPACE
from admitter.testing import RACK_LABEL, LocalCluster
from admitter.testing.waiting import wait_for
from admitter.webhook.lookup import ApiLookup
from admitter.webhook.server import start_webhook_server
from admitter.webhook.thread import WebhookThread

from builders.core import GPU
from builders.kube import cluster_queue, local_queue, topology

ROOT = Path(__file__).parents[2]
ADMIN = "admitter-admin"  # the controller process runs with the admin kubeconfig
TEST_LABEL = "admitter.dev/test-run"
CAP = 2 * 3600
"""The leaf's maxMinRuntime."""


class Identity:
    """Raw JSON requests as one user (client certificate), with kubectl's strict field
    validation, so an unknown key is an error rather than silently dropped."""

    def __init__(self, cluster: LocalCluster, cert: pki.CertKey, tmp: Path) -> None:
        self.port = cluster.api_port
        cert.write(tmp / "user.crt", tmp / "user.key")
        self.context = ssl.create_default_context(cafile=str(cluster.ca_path))
        self.context.load_cert_chain(str(tmp / "user.crt"), str(tmp / "user.key"))

    def send(self, method: str, path: str, body: Any = None,
             content_type: str = "application/json",
             dry_run: bool = False) -> tuple[int, dict[str, Any]]:
        connection = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context,
                                                 timeout=15)
        query = "?fieldValidation=Strict" if method in ("POST", "PATCH", "PUT") else "?"
        query += "&dryRun=All" if dry_run else ""
        try:
            connection.request(method, path + query,
                               body=None if body is None else json.dumps(body),
                               headers={"Content-Type": content_type})
            response = connection.getresponse()
            text = response.read().decode()
        finally:
            connection.close()
        return response.status, json.loads(text) if text else {}


@dataclass
class World:
    cluster: LocalCluster
    namespace: str
    root: str
    leaf: str
    mallory: Identity

    def labelled(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {}).setdefault("labels", {})[TEST_LABEL] = self.namespace
        return obj

    def get(self, path: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.cluster.api().request("GET", path)
        return answer

    def job(self, name: str) -> dict[str, Any]:
        return self.get(kube.JOBS.path(self.namespace, name))

    def admitted(self, name: str) -> bool:
        job = self.job(name)
        return not job["spec"].get("suspend") and "admitter.dev/admitted-workload" in (
            job["metadata"].get("annotations") or {})


def _ca(cluster: LocalCluster) -> pki.CertKey:
    ca_dir = cluster.ca_path.parent
    return pki.CertKey(
        x509.load_pem_x509_certificate(cluster.ca_path.read_bytes()),
        serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), None),
    )


def _webhook_configurations(base_url: str, ca_pem: bytes, namespace: str) -> list[dict[str, Any]]:
    """deploy/webhooks.yaml pointed at `base_url`, limited to this test's namespace and its
    labelled cluster-scoped objects (the resource hook is split in two for that)."""
    configurations = list(yaml.safe_load_all((ROOT / "deploy" / "webhooks.yaml").read_text()))
    in_namespace = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    for configuration in configurations:
        configuration["metadata"]["name"] = f"hostile-{namespace}"
        hooks = []
        for hook in configuration["webhooks"]:
            hook["clientConfig"] = {"url": base_url + hook["clientConfig"]["service"]["path"],
                                    "caBundle": base64.b64encode(ca_pem).decode()}
            if hook["rules"][0]["resources"] == ["jobs"]:
                hook["namespaceSelector"] = in_namespace
                hooks.append(hook)
                continue
            namespaced = copy.deepcopy(hook)
            namespaced["name"] = "namespaced-" + hook["name"]
            namespaced["namespaceSelector"] = in_namespace
            namespaced["rules"] = [{**rule, "resources": [r for r in rule["resources"]
                                                          if r in ("localqueues", "workloads")]}
                                   for rule in hook["rules"]]
            namespaced["rules"] = [rule for rule in namespaced["rules"] if rule["resources"]]
            hook["objectSelector"] = {"matchLabels": {TEST_LABEL: namespace}}
            hooks += [hook, namespaced]
        configuration["webhooks"] = hooks
    return configurations


@contextlib.asynccontextmanager
async def _webhooks(cert_dir: Path, kubeconfig: Path) -> AsyncIterator[web.AppRunner]:
    api = await config.new_client_from_config(config_file=str(kubeconfig))
    async with api:
        runner = await start_webhook_server(Settings(), ApiLookup(api), cert_dir, 0,
                                            host="127.0.0.1", controller_usernames=[ADMIN])
        try:
            yield runner
        finally:
            await runner.cleanup()


@contextlib.contextmanager
def hostile_world(local_cluster: LocalCluster, tmp: Path) -> Iterator[World]:
    """A namespace, `mallory` allowed to write admitter's kinds, Jobs and pods, the webhooks
    in a thread registered for this namespace, the controller as a process, and a tree: root
    (maxMinRuntime 4h) → leaf (16 GPUs, 2h) with LocalQueue `default`, a rack Topology."""
    namespace = f"hostile-{secrets.token_hex(3)}"
    admin = local_cluster.api()
    admin.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    admin.request("POST", f"{rbac}/clusterroles", {
        "metadata": {"name": namespace},
        "rules": [{"apiGroups": ["admitter.dev", "batch", ""], "verbs": ["*"],
                   "resources": ["clusterqueues", "localqueues", "topologies", "workloads",
                                 "jobs", "pods"]}],
    })
    admin.request("POST", f"{rbac}/clusterrolebindings", {
        "metadata": {"name": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": namespace},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": "mallory"}],
    })
    certs = mint("admitter-webhook", NAMESPACE, dt.timedelta(hours=1))
    write(certs, tmp)
    thread = WebhookThread(lambda: _webhooks(tmp, local_cluster.kubeconfig_path))
    runner = asyncio.run(thread.start())
    base_url = f"https://127.0.0.1:{runner.addresses[0][1]}"
    configurations = _webhook_configurations(base_url, certs.ca.cert_pem, namespace)
    registration = "/apis/admissionregistration.k8s.io/v1"
    for configuration in configurations:
        admin.request("POST", f"{registration}/{configuration['kind'].lower()}s", configuration)
    mallory = Identity(local_cluster, pki.client_cert(_ca(local_cluster), "mallory"), tmp)
    world = World(local_cluster, namespace, f"{namespace}-org", f"{namespace}-team", mallory)
    _wait_for_webhooks(world)
    controller = ControllerProcess(local_cluster.kubeconfig_path, tmp / "controller.log",
                                   "--no-leader-elect")
    try:
        _create_tree(world)
        yield world
    finally:
        controller.kill()
        for configuration in configurations:
            admin.request("DELETE", f"{registration}/{configuration['kind'].lower()}s/"
                          f"{configuration['metadata']['name']}")
        asyncio.run(thread.stop())
        selector = f"{TEST_LABEL}={namespace}"
        local_cluster.kubectl("delete", "clusterqueues,topologies", "-l", selector,
                              "--wait=false", check=False)
        for kind in ("clusterrolebindings", "clusterroles"):
            admin.request("DELETE", f"{rbac}/{kind}/{namespace}")
        admin.request("DELETE", f"/api/v1/namespaces/{namespace}")


def _wait_for_webhooks(world: World) -> None:
    """The webhooks are called: a labelled ClusterQueue under a missing parent is refused."""
    probe = world.labelled(cluster_queue("probe", parent="missing"))

    def refused() -> bool:
        status, answer = world.mallory.send("POST", kube.CLUSTER_QUEUES.path(), probe,
                                            dry_run=True)
        return status == 422 and "ClusterQueue 'missing' does not exist" in answer["message"]

    wait_for(refused, 30, "the webhooks to be in effect")


def _create_tree(world: World) -> None:
    admin = world.cluster.api()
    root = cluster_queue(world.root, maxMinRuntime="4h", resources={GPU: {"quota": 64}})
    leaf = cluster_queue(world.leaf, parent=world.root, maxMinRuntime=format_duration(CAP),
                         resources={GPU: {"quota": 16}})
    for kind, obj in ((kube.CLUSTER_QUEUES, root), (kube.CLUSTER_QUEUES, leaf),
                      (kube.TOPOLOGIES, topology(world.namespace, RACK_LABEL))):
        admin.request("POST", kind.path(), world.labelled(obj))
    admin.request("POST", kube.LOCAL_QUEUES.path(world.namespace), local_queue(world.leaf))

