"""The Helm chart and the kustomization on the real control plane: every object they make is
accepted (server dry-run, then for real), and a chart install with `unlabelledWork`, its
controller running with nothing but the chart's ServiceAccount token and RBAC, queues an
unlabelled GPU Job and gates a bare GPU Pod, admits them and evicts them for a higher priority,
without one request refused. The real `helm` installs, upgrades, uninstalls and installs the
chart again, three times over, with the aggregation controller running: each step succeeds and
each uninstall leaves nothing of the release behind.

The session's other tests share the cluster, so each object goes to the test's namespace, the
cluster-wide ones (roles, bindings, webhook configurations, the leader fence) get a suffix,
and the webhook configurations applied for real select only objects with a label nothing
carries; the CRDs are the session's own and stay."""

from __future__ import annotations

import copy
import functools
import json
import re
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from admitter_world import ControllerProcess, apply_all, jobs, priority_class, running
from test_unlabelled_work import (
    delete_webhook_configurations,
    get_pod,
    gpu_pod,
    unlabelled_job,
    unlabelled_webhooks_in_effect,
)

from admitter.api import yaml_text
from admitter.api.contract import QUEUE_LABEL
from admitter.api.settings import Settings
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.names import NAMESPACE, SECRET, SERVICE_ACCOUNT
from admitter.kube.objects import ADMISSION_GATE, Obj
from admitter.testing import LocalCluster
from admitter.testing.helm_chart import CHART, comparable, helm, render
from admitter.testing.waiting import eventually
from admitter.testing.webhooks import admitter_webhooks

from builders.kube import leaf_queue

pytestmark = pytest.mark.integration
ROOT = Path(__file__).parents[2]
RENAMED = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
           "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy",
           "ValidatingAdmissionPolicyBinding"}
OPT_IN_LABEL = "admitter.dev/quota"


def label_token() -> str:
    """A random suffix that is also a safe label value. A bare hex token such as `1e5678` is
    dumped unquoted by PyYAML and read back as a number by the API server's YAML reader, which
    then refuses the selector."""
    return f"t{secrets.token_hex(3)}"


def relocated(docs: list[Obj], namespace: str, suffix: str) -> list[Obj]:
    """`docs` moved into `namespace` (admitter's namespace becomes it), cluster-wide names
    suffixed, webhooks selecting nothing."""
    text = yaml_text.dump_all(docs).replace(f"namespace: {NAMESPACE}", f"namespace: {namespace}")
    moved = [doc for doc in yaml.safe_load_all(text) if doc]
    for doc in moved:
        if doc["kind"] == "Namespace":
            doc["metadata"]["name"] = namespace
        if doc["kind"] in RENAMED:
            doc["metadata"]["name"] += f"-{suffix}"
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] += f"-{suffix}"
        if doc["kind"] == "ValidatingAdmissionPolicyBinding":
            doc["spec"]["policyName"] += f"-{suffix}"
        for hook in doc.get("webhooks", []):
            hook["objectSelector"] = {"matchLabels": {"admitter.dev/chart-test": suffix}}
    return moved


@pytest.fixture
def apply(local_cluster: LocalCluster, admitter_crds: None) -> Iterator[Any]:
    """`kubectl apply` of objects, dry-run on the server first; the suffixed cluster-wide ones
    are deleted afterwards (the namespaced ones go with the test's namespace)."""
    applied: list[Obj] = []

    def apply_objects(docs: list[Obj]) -> str:
        text = yaml_text.dump_all(docs)
        local_cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=text)
        applied.extend(d for d in docs if d["kind"] in RENAMED)
        return local_cluster.kubectl("apply", "-f", "-", input=text).stdout

    yield apply_objects
    for doc in applied:
        local_cluster.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"],
                              "--ignore-not-found")


def kustomized(cluster: LocalCluster) -> list[Obj]:
    built = cluster.kubectl("kustomize", str(ROOT / "deploy")).stdout
    return [doc for doc in yaml.safe_load_all(built) if doc]


def test_the_chart_and_the_kustomization_are_accepted_by_the_api_server(
        local_cluster: LocalCluster, namespace: str, apply: Any) -> None:
    suffix = label_token()
    kustomize, chart = kustomized(local_cluster), render(namespace=NAMESPACE)
    # The same objects: the chart adds its certificate Secret, kustomize the Namespace.
    assert {k: v for k, v in comparable(chart).items() if k != ("Secret", SECRET)} == {
        k: v for k, v in comparable(kustomize).items() if k != ("Namespace", NAMESPACE)}
    for docs in (kustomize, chart):
        moved = relocated(docs, namespace, suffix)
        out = apply(moved).splitlines()
        assert len(out) == len(moved), out  # one line per object applied
    # An upgrade keeps the certificate already installed (the webhooks' CA bundle with it).
    installed = local_cluster.kubectl("get", "secret", SECRET, "-n", namespace, "-o", "json")
    upgraded = comparable(render(namespace=namespace, kubeconfig=local_cluster.kubeconfig_path))
    assert upgraded["Secret", SECRET]["data"] == json.loads(installed.stdout)["data"]
    listed = local_cluster.kubectl("get", "deployment,service,configmap,pdb,role,rolebinding,"
                                   "serviceaccount,secret", "-n", namespace, "-o", "name").stdout
    assert {"deployment.apps/admitter", "service/admitter-webhook", "configmap/admitter-config",
            "poddisruptionbudget.policy/admitter", "secret/admitter-webhook-tls",
            "serviceaccount/admitter"} <= set(listed.split())


def service_account_kubeconfig(cluster: LocalCluster, namespace: str, path: Path,
                               account: str = SERVICE_ACCOUNT) -> Path:
    """A kubeconfig that authenticates with only the ServiceAccount's token."""
    token = cluster.kubectl("create", "token", account, "-n", namespace,
                            "--duration=1h").stdout.strip()
    config = yaml.safe_load(cluster.kubeconfig_path.read_text())
    config["users"] = [{"name": config["users"][0]["name"], "user": {"token": token}}]
    path.write_text(yaml_text.dump(config))
    return path


async def test_a_chart_install_with_unlabelled_work_runs_on_its_own_account_without_a_403(
        local_cluster: LocalCluster, api: Kube, namespace: str, apply: Any,
        tmp_path: Path) -> None:
    token = label_token()
    values = {"settings": {"cycle": "1s", "unlabelledWork": {
        "namespaceSelector": {"matchLabels": {OPT_IN_LABEL: token}}}}}
    docs = render(values, namespace=namespace)
    apply(relocated(docs, namespace, token))
    (config,) = [d for d in docs if d["kind"] == "ConfigMap"]
    settings_yaml = config["data"]["config.yaml"]
    settings = Settings.model_validate(yaml.safe_load(settings_yaml))
    webhooks = [d for d in docs if d["kind"].endswith("WebhookConfiguration")]

    await api.request("PATCH", f"/api/v1/namespaces/{namespace}",
                      {"metadata": {"labels": {OPT_IN_LABEL: token}}},
                      content_type=kube.MERGE_PATCH)
    await apply_all(api, *leaf_queue(f"chart-{token}", 8, limit=8, namespace=namespace))
    await priority_class(api, "chart-test-low", 10)
    await priority_class(api, "chart-test-high", 50)
    account = f"system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}"
    try:
        async with admitter_webhooks(api.api, settings, tmp_path / "certs", [account],
                                     configurations=webhooks):
            await unlabelled_webhooks_in_effect(api, namespace)
            await run_the_cycle(local_cluster, api, namespace, settings_yaml, tmp_path)
    finally:
        delete_webhook_configurations(local_cluster)
        local_cluster.kubectl("delete", "pods,jobs", "--all", "-n", namespace,
                              "--grace-period=0")


def low_priority(obj: Obj) -> Obj:
    """Preemptible two seconds after it starts."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["annotations"].update({"admitter.dev/min-runtime": "2s",
                                           "admitter.dev/resumable": "true"})
    spec = obj["spec"]["template"]["spec"] if obj["kind"] == "Job" else obj["spec"]
    spec["priorityClassName"] = "chart-test-low"
    return obj


async def evicted(api: Kube, namespace: str, urgent: str, evictions: int) -> bool:
    """`urgent` runs, and `evictions` of the Job `train` (suspended) and the Pod `notebook`
    (deleted) happened."""
    current = await jobs(api, namespace)
    pods = (await api.request("GET", kube.PODS.path(namespace)))["items"]
    gone = "notebook" not in {p["metadata"]["name"] for p in pods}
    return (running(current[urgent])
            and int(current["train"]["spec"]["suspend"]) + int(gone) == evictions)


def high_priority(job: Obj) -> Obj:
    """Funded (a min runtime), so it may preempt."""
    job["metadata"]["annotations"]["admitter.dev/min-runtime"] = "2s"
    job["spec"]["template"]["spec"]["priorityClassName"] = "chart-test-high"
    return job


async def run_the_cycle(cluster: LocalCluster, api: Kube, namespace: str, settings_yaml: str,
                        tmp_path: Path) -> None:
    """Queue and gate, admit, then evict both for Jobs of higher priority."""
    held = await api.create(kube.JOBS, low_priority(unlabelled_job(namespace, "train", 4)))
    assert held["spec"]["suspend"] is True
    assert held["metadata"]["labels"][QUEUE_LABEL] == "default"
    pod = await api.create(kube.PODS, low_priority(gpu_pod(namespace, "notebook", 4)))
    assert pod["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]

    controller = ControllerProcess(
        service_account_kubeconfig(cluster, namespace, tmp_path / "account.kubeconfig"),
        tmp_path / "controller.log", "--lease-namespace", namespace,
        settings_yaml=settings_yaml)
    try:
        async def admitted() -> bool:
            current = await get_pod(api, namespace, "notebook")
            return (running((await jobs(api, namespace))["train"])
                    and not current["spec"].get("schedulingGates"))

        await eventually(admitted, "the Job running and the Pod ungated", 90)
        # Each urgent Job takes the place of one: the Job is suspended, the Pod deleted.
        for urgent, evictions in (("urgent", 1), ("urgent-2", 2)):
            await api.create(kube.JOBS, high_priority(unlabelled_job(namespace, urgent, 4)))
            await eventually(functools.partial(evicted, api, namespace, urgent, evictions),
                             f"{urgent} running after {evictions} eviction(s)", 90)
        assert controller.alive()
    finally:
        controller.kill()
    # The controller watches every namespace: a job an earlier test left in a namespace being
    # deleted gets a 403 for its Workload (NamespaceTerminating), which says nothing of RBAC.
    # A refusal is logged as "(403)"; a bare 403 may be part of an Audit-Id or a uid.
    records = re.split(r"\n(?=\d{4}-\d\d-\d\d )", controller.log.read_text())
    denied = [record for record in records
              if ("(403)" in record or "forbidden" in record.lower())
              and "because it is being terminated" not in record]
    assert not denied, denied[-3:]


def run_helm(cluster: LocalCluster, *args: str) -> str:
    """`helm ARGS` against the cluster; a failure says what Helm printed."""
    done = subprocess.run([str(helm()), *args, "--kubeconfig", str(cluster.kubeconfig_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr or done.stdout}"
    return done.stdout


def present(cluster: LocalCluster, docs: list[Obj], namespace: str) -> set[str]:
    """Which of `docs` exist (kind/name), each kind asked once."""
    found = set()
    for kind in {d["kind"] for d in docs}:
        names = [d["metadata"]["name"] for d in docs if d["kind"] == kind]
        listed = cluster.kubectl("get", kind, *names, "-n", namespace, "--ignore-not-found",
                                 "-o", "name")
        found |= {f"{kind}/{line.rpartition('/')[2]}" for line in listed.stdout.split()}
    return found


def helm_owned(cluster: LocalCluster, kind: str, name: str) -> bool:
    done = cluster.kubectl("get", kind, name, "-o", "json", check=False)
    annotations = json.loads(done.stdout)["metadata"].get("annotations") or {}
    return "meta.helm.sh/release-name" in annotations


async def aggregated_into_edit(cluster: LocalCluster) -> bool:
    """Whether `edit` holds admitter-queue-viewer's reading, as the aggregation controller
    keeps it."""
    edit = json.loads(cluster.kubectl("get", "clusterrole", "edit", "-o", "json").stdout)
    return any("admitter.dev" in rule.get("apiGroups", []) for rule in edit.get("rules") or [])


async def test_helm_installs_upgrades_uninstalls_and_installs_again_three_times(
        local_cluster: LocalCluster, admitter_crds: None) -> None:
    namespace = f"chart-cycle-{secrets.token_hex(3)}"
    made = [d for d in render(namespace=namespace) if d["kind"] != "CustomResourceDefinition"]
    cluster_wide = [d for d in made if "namespace" not in d["metadata"]]
    # Objects of the chart's names another test applied with kubectl would be refused by the
    # first install for what they are: not the release's. (The session's CRDs stay: Helm
    # installs crds/ only where missing and never deletes them.)
    for doc in cluster_wide:
        name = doc["metadata"]["name"]
        if f"{doc['kind']}/{name}" in present(local_cluster, [doc], namespace) and not (
                helm_owned(local_cluster, doc["kind"], name)):
            local_cluster.kubectl("delete", doc["kind"], name)
    upgrade = ["--set", "replicas=3", "--set", "clusterQueueViewer.groups={system:authenticated}",
               "--set", "settings.cycle=5s"]
    try:
        for cycle in range(3):
            assert present(local_cluster, made, namespace) == set(), f"before install {cycle}"
            run_helm(local_cluster, "install", "admitter", str(CHART), "-n", namespace,
                     "--create-namespace")
            assert present(local_cluster, made, namespace) == {
                f"{d['kind']}/{d['metadata']['name']}" for d in made}
            # The aggregation controller has seen the release's roles before the upgrade.
            await eventually(functools.partial(aggregated_into_edit, local_cluster),
                             "edit to include admitter-queue-viewer's reading")
            run_helm(local_cluster, "upgrade", "admitter", str(CHART), "-n", namespace, *upgrade)
            deployment = json.loads(local_cluster.kubectl(
                "get", "deployment", "admitter", "-n", namespace, "-o", "json").stdout)
            assert deployment["spec"]["replicas"] == 3
            local_cluster.kubectl("get", "clusterrolebinding", "admitter-clusterqueue-viewer")
            run_helm(local_cluster, "upgrade", "admitter", str(CHART), "-n", namespace)
            # --wait: Helm waits for what it deleted to be gone, and says what never went (a
            # role the aggregation controller recreated would stay).
            run_helm(local_cluster, "uninstall", "admitter", "-n", namespace, "--wait",
                     "--timeout", "2m")

            # The aggregation controller has seen the roles go when `edit` lost their
            # reading; anything it recreated meanwhile is there by then.
            async def edit_without_admitter() -> bool:
                return not await aggregated_into_edit(local_cluster)

            await eventually(edit_without_admitter, "edit to lose admitter-queue-viewer's reading")
            assert present(local_cluster, made, namespace) == set(), f"after uninstall {cycle}"
    finally:
        # Whatever a failure left, so the session's other tests meet no webhook of this one.
        subprocess.run([str(helm()), "uninstall", "admitter", "-n", namespace,
                        "--ignore-not-found", "--kubeconfig", str(local_cluster.kubeconfig_path)],
                       capture_output=True, timeout=300, check=False)
        for doc in cluster_wide:
            local_cluster.kubectl("delete", doc["kind"], doc["metadata"]["name"],
                                  "--ignore-not-found")
        local_cluster.kubectl("delete", "namespace", namespace, "--wait=false",
                              "--ignore-not-found")
