"""Kubeflow Trainer's real controller manager (built by hack/trainer/build.sh) running against
a local control plane, for the tests that run TrainJobs. Trainer turns a TrainJob into a
JobSet, so JobSet's controller must run beside it for pods to appear.

Trainer's manager waits for its own certificate rotation before it starts any controller:
it fills the Secret `kubeflow-trainer-webhook-cert` in `kubeflow-system`, expects the Secret
mounted at a fixed directory, and injects its CA into the webhook configuration
`validator.trainer.kubeflow.org`. Out of a cluster, the runner plays the kubelet (it copies
the Secret's certificate to that directory) and registers that configuration without
webhooks: its certificate names only the in-cluster Service, which a local API server cannot
reach, so Trainer's validating webhooks do not run here (they only validate)."""

from __future__ import annotations

import base64
import json
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from admitter.api import yaml_text
from admitter.testing.cluster import LocalCluster
from admitter.testing.operators import Operator, free_port, running_manager, still_running
from admitter.testing.waiting import wait_for

CRDS = ("clustertrainingruntimes", "trainingruntimes", "trainjobs")
TRAINER = Operator(
    name="trainer", module="github.com/kubeflow/trainer/v2",
    crd_paths=tuple(f"manifests/base/crds/trainer.kubeflow.org_{crd}.yaml" for crd in CRDS),
    crds=tuple(f"{crd}.trainer.kubeflow.org" for crd in CRDS))
NAMESPACE = "kubeflow-system"
SECRET = "kubeflow-trainer-webhook-cert"
WEBHOOKS = "validator.trainer.kubeflow.org"
MOUNTED_CERTS = Path("/tmp/k8s-webhook-server/serving-certs")
"""Where Trainer's manager reads its serving certificate (fixed in its code)."""
RUNTIMES = "manifests/base/runtimes"
"""Trainer's own ClusterTrainingRuntimes (`torch-distributed`, ...), in its module."""


def _bootstrap_objects() -> list[dict[str, object]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": SECRET, "namespace": NAMESPACE}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": WEBHOOKS}, "webhooks": []},
    ]


def _mount_secret(cluster: LocalCluster) -> bool:
    """Copy the rotated certificate to where the manager reads it, once there is one."""
    done = cluster.kubectl("get", "secret", SECRET, "-n", NAMESPACE, "-o", "json", check=False)
    data = json.loads(done.stdout).get("data") or {} if done.returncode == 0 else {}
    if not data.get("tls.crt") or not data.get("tls.key"):
        return False
    MOUNTED_CERTS.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        (MOUNTED_CERTS / name).write_bytes(base64.b64decode(data[name]))
    return True


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2.0) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@contextmanager
def running_trainer_operator(cluster: LocalCluster,
                             work_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Install Trainer's CRDs and its ClusterTrainingRuntimes and run its manager until the
    block ends; its log goes to `work_dir`."""
    module = TRAINER.install(cluster)
    cluster.kubectl("apply", "-f", "-", input=yaml_text.dump_all(_bootstrap_objects()))
    probe = free_port()
    args = ["--metrics-bind-address=0", f"--health-probe-bind-address=127.0.0.1:{probe}",
            f"--webhook-server-port={free_port()}"]
    with running_manager(TRAINER, cluster, args, work_dir) as process:
        alive = still_running(process, "Trainer's manager")
        try:
            wait_for(lambda: _mount_secret(cluster), 60.0, "Trainer's rotated certificate",
                     on_poll=alive)
            wait_for(lambda: _ready(probe), 120.0, "Trainer's manager ready", on_poll=alive)
            runtimes = sorted(str(path) for path in (module / RUNTIMES).glob("*.yaml")
                              if path.name != "kustomization.yaml")
            for runtime in runtimes:
                cluster.kubectl("apply", "--server-side", "-f", runtime)
            yield process
        finally:
            cluster.kubectl("delete", "--ignore-not-found", "validatingwebhookconfiguration",
                            WEBHOOKS, check=False)
