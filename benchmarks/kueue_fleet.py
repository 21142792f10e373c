"""Kueue on bench_fleet's control planes: Kueue's full manager (`cmd/kueue`, MultiKueue
included) as a plain process beside each local control plane, for its `kueue` and
`multikueue` ways.

The binary is built by `hack/kueue/build.sh kueue` from the module hack/kueue/go.mod pins, and
Kueue's CRDs come from the same module. Kueue runs as its own install configures it
(`config/components/manager/controller_manager_config.yaml`: client QPS 50, burst 100, its
concurrency per kind; internal certificate management on), except:

- **No webhook is registered.** A local control plane cannot reach a webhook Service of a
  process outside a pod, so Kueue's webhook server listens on 127.0.0.1 but no webhook
  configuration points at it. The benchmark writes what the webhooks would default: each Job
  carries its queue-name label and is created suspended, on a MultiKueue manager with
  `spec.managedBy: kueue.x-k8s.io/multikueue`; each ClusterQueue names
  `namespaceSelector: {}`.
- **Certificates.** Kueue's certificate rotator writes its Secret and injects its CA into the
  CRDs' conversion webhooks, so the CRDs carry the conversion stanza of Kueue's own install
  (its `config/components/crd/patches/webhook_in_*.yaml`); nothing asks for another version
  than the stored v1beta2, so the conversion is never called. The Secret's certificate is
  copied into the process's certificate directory, as the kubelet mounts it into Kueue's pod.
- Metrics, health probes and leader election off (admitter's controller runs without the
  last here too; writes are counted by the API servers), only the `batch/job` integration (no
  other kind's CRD is installed), `VisibilityOnDemand` off (its server would take one fixed
  port for three processes).

On a MultiKueue manager the workers are MultiKueueClusters whose kubeconfig Secret (in
`kueue-system`) holds each worker's admin kubeconfig, one MultiKueueConfig names both, the
AdmissionCheck `multikueue` (`kueue.x-k8s.io/multikueue`, Kueue's default `AllAtOnce`
dispatcher) guards the manager's ClusterQueue, and each worker has a ClusterQueue and
LocalQueue of the same names holding its own GPUs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from common import ROOT

from admitter.api.contract import QUEUE_LABEL
from admitter.kube.client import Kind, Kube, Obj
from admitter.kube.objects import condition
from admitter.testing import GPU_RESOURCE, LocalCluster
from admitter.testing.kubeapi import ApiError

GROUP = "kueue.x-k8s.io"
VERSION = f"{GROUP}/v1beta2"
WORKLOADS = Kind(VERSION, "workloads", True)
CLUSTER_QUEUES = Kind(VERSION, "clusterqueues", False)
ADMISSION_CHECKS = Kind(VERSION, "admissionchecks", False)
MULTIKUEUE_CLUSTERS = Kind(VERSION, "multikueueclusters", False)
QUEUE_NAME_LABEL = f"{GROUP}/queue-name"
MULTIKUEUE_CONTROLLER = f"{GROUP}/multikueue"
NAMESPACE = "kueue-system"
CERT_SECRET = "kueue-webhook-server-cert"
"""Kueue's defaults (`internalCertManagement.webhookSecretName`, `namespace`)."""
FLAVOR = "default"
CHECK = "multikueue"
HACK = ROOT / "hack" / "kueue"


@dataclass(frozen=True)
class KueueBuild:
    binary: Path
    source: Path
    """The module's directory in Go's module cache (its CRDs and configs)."""


def build() -> KueueBuild:
    """Kueue's manager after `hack/kueue/build.sh kueue` (a no-op once built)."""
    done = subprocess.run(["bash", str(HACK / "build.sh"), "kueue"], capture_output=True,
                          text=True, check=True)
    source = Path(done.stdout.strip().splitlines()[-1])
    version = source.name.split("@")[-1]
    return KueueBuild(ROOT / "hack" / "bin" / f"kueue-{version}" / "kueue", source)


def write_crds(source: Path, out: Path) -> Path:
    """Kueue's CRDs into `out`, each with the conversion webhook Kueue's install patches in
    (`config/components/crd/kustomization.yaml`'s patches, at their Service in kueue-system),
    which Kueue's certificate rotator needs to inject its CA into."""
    crd_dir = source / "config" / "components" / "crd"
    kustomization = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
    conversions = {}
    for entry in kustomization.get("patches", []):
        patch = yaml.safe_load((crd_dir / entry["path"]).read_text())
        conversion = patch["spec"]["conversion"]
        conversion["webhook"]["clientConfig"]["service"].update(
            namespace=NAMESPACE, name="kueue-webhook-service")
        conversions[patch["metadata"]["name"]] = conversion
    out.mkdir(parents=True)
    for path in sorted((crd_dir / "bases").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["metadata"]["name"] in conversions:
            crd["spec"]["conversion"] = conversions[crd["metadata"]["name"]]
        (out / path.name).write_text(yaml.safe_dump(crd))
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def configuration(source: Path, cert_dir: Path) -> dict[str, Any]:
    """Kueue's shipped manager configuration with the changes the module docstring lists."""
    shipped = source / "config" / "components" / "manager" / "controller_manager_config.yaml"
    config: dict[str, Any] = yaml.safe_load(shipped.read_text())
    config.update(
        namespace=NAMESPACE,
        health={"healthProbeBindAddress": "0"},
        metrics={"bindAddress": "0"},
        webhook={"port": _free_port(), "host": "127.0.0.1", "certDir": str(cert_dir)},
        leaderElection={"leaderElect": False},
        internalCertManagement={"enable": True},
        integrations={"frameworks": ["batch/job"]},
        featureGates={"VisibilityOnDemand": False},
    )
    return config


def apply(cluster: LocalCluster, objects: list[Obj]) -> None:
    cluster.kubectl("apply", "--server-side", "-f", "-",
                    input=yaml.safe_dump_all(objects))


class KueueProcess:
    """Kueue's manager against one local control plane; leave the `with` to stop it."""

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.process = process
        self.log_path = log_path

    @classmethod
    @contextlib.contextmanager
    def start(cls, kueue: KueueBuild, cluster: LocalCluster, workdir: Path,
              timeout: float = 300.0) -> Iterator[KueueProcess]:
        """Start Kueue, and mount its certificate once its rotator has written the Secret
        (Kueue waits for that before it starts its controllers)."""
        cert_dir = workdir / "certs"
        cert_dir.mkdir(parents=True)
        config_path = workdir / "kueue-config.yaml"
        config_path.write_text(yaml.safe_dump(configuration(kueue.source, cert_dir)))
        apply(cluster, [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": CERT_SECRET, "namespace": NAMESPACE}}])
        log_path = workdir / "kueue.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [str(kueue.binary), f"--config={config_path}",
                 f"--kubeconfig={cluster.kubeconfig_path}"],
                stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig_path)})
        running = cls(process, log_path)
        try:
            running._mount_certificate(cluster, cert_dir, timeout)
            yield running
        finally:
            running.stop()

    def _mount_certificate(self, cluster: LocalCluster, cert_dir: Path, timeout: float) -> None:
        path = f"/api/v1/namespaces/{NAMESPACE}/secrets/{CERT_SECRET}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.raise_if_exited()
            with contextlib.suppress(ApiError, OSError):
                data = cluster.api().request("GET", path).get("data") or {}
                if "tls.crt" in data and "tls.key" in data:
                    for name, value in data.items():
                        (cert_dir / name).write_bytes(base64.b64decode(value))
                    return
            time.sleep(0.5)
        raise TimeoutError(f"Kueue wrote no certificate within {timeout:.0f}s: {self.tail()}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def tail(self, lines: int = 20) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def raise_if_exited(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"Kueue exited with {self.process.returncode}:\n{self.tail()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


# ---- the queues ----------------------------------------------------------------------------


def queues(namespace: str, gpus: int, check: str | None = None) -> list[Obj]:
    """A ResourceFlavor, a ClusterQueue named after `namespace` holding `gpus` GPUs (guarded
    by AdmissionCheck `check`, if any) and its LocalQueue `default` there."""
    cluster_queue: Obj = {
        "apiVersion": VERSION, "kind": "ClusterQueue", "metadata": {"name": namespace},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{
                "coveredResources": [GPU_RESOURCE],
                "flavors": [{"name": FLAVOR, "resources": [
                    {"name": GPU_RESOURCE, "nominalQuota": str(gpus)}]}]}]}}
    if check is not None:
        cluster_queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    return [
        {"apiVersion": VERSION, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        cluster_queue,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": VERSION, "kind": "LocalQueue",
         "metadata": {"name": "default", "namespace": namespace},
         "spec": {"clusterQueue": namespace}},
    ]


def multikueue(workers: dict[str, LocalCluster]) -> list[Obj]:
    """The manager's side of MultiKueue: a kubeconfig Secret and a MultiKueueCluster per
    worker, the MultiKueueConfig naming them all, and the AdmissionCheck `multikueue`."""
    objects: list[Obj] = []
    for name, cluster in workers.items():
        secret = f"{name}-kubeconfig"
        objects += [
            {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": secret, "namespace": NAMESPACE},
             "data": {"kubeconfig": base64.b64encode(cluster.kubeconfig_path.read_bytes())
                      .decode()}},
            {"apiVersion": VERSION, "kind": "MultiKueueCluster", "metadata": {"name": name},
             "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                       "location": secret}}}}]
    return [
        *objects,
        {"apiVersion": VERSION, "kind": "MultiKueueConfig", "metadata": {"name": CHECK},
         "spec": {"clusters": list(workers)}},
        {"apiVersion": VERSION, "kind": "AdmissionCheck", "metadata": {"name": CHECK},
         "spec": {"controllerName": MULTIKUEUE_CONTROLLER,
                  "parameters": {"apiGroup": GROUP, "kind": "MultiKueueConfig",
                                 "name": CHECK}}},
    ]


async def all_active(client: Kube, kinds: tuple[Kind, ...], timeout: float = 300.0) -> None:
    """Wait until every object of `kinds` exists and reports `Active=True`."""
    deadline = time.monotonic() + timeout
    while True:
        waiting = []
        for kind in kinds:
            items = (await client.list(kind))["items"]
            waiting += [f"{kind.plural}/{item['metadata']['name']}" for item in items
                        if (condition(item, "Active") or {}).get("status") != "True"]
            if not items:
                waiting.append(f"any {kind.plural}")
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"not Active within {timeout:.0f}s: {', '.join(waiting)}")
        await asyncio.sleep(0.5)


def job(admitter_job: Obj, managed_by_multikueue: bool) -> Obj:
    """The same Job as Kueue's Job webhook would leave it: in LocalQueue `default`,
    suspended, and on a MultiKueue manager managed by MultiKueue."""
    kueue_job = copy.deepcopy(admitter_job)
    labels = kueue_job["metadata"]["labels"]
    labels.pop(QUEUE_LABEL, None)
    labels[QUEUE_NAME_LABEL] = "default"
    kueue_job["metadata"].pop("annotations", None)  # admitter's own (its minimum runtime)
    kueue_job["spec"]["suspend"] = True
    if managed_by_multikueue:
        kueue_job["spec"]["managedBy"] = MULTIKUEUE_CONTROLLER
    return kueue_job
