"""JobSet's real controller manager (built by hack/jobset/build.sh) running against a local
control plane, for the tests and the demo that run JobSets.

JobSet's controller relies on its defaulting webhook (a JobSet it did not default makes it
panic), so its JobSet webhooks are registered too, served by the manager on 127.0.0.1 with a
certificate from a local CA (`admitter.pki`) in place of JobSet's in-cluster cert rotation.
Its Pod webhooks (exclusive placement per topology domain) are not registered: they would
see every Pod of the shared test cluster, and no test uses exclusive placement."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from admitter import pki
from admitter.api import yaml_text
from admitter.kube.objects import Obj
from admitter.testing.cluster import LocalCluster
from admitter.testing.operators import Operator, free_port, running_manager, wait_serving

JOBSET = Operator(name="jobset", module="sigs.k8s.io/jobset",
                  crd_paths=("config/components/crd/bases",), crds=("jobsets.jobset.x-k8s.io",))


def _jobset_webhooks(module: Path, base_url: str, ca_pem: bytes) -> list[Obj]:
    """JobSet's own webhook configurations with only their JobSet webhooks, each calling the
    local manager at its path."""
    manifests = module / "config" / "components" / "webhook" / "manifests.yaml"
    found = []
    for doc in yaml.safe_load_all(manifests.read_text()):
        if not doc:
            continue
        hooks = [hook for hook in doc["webhooks"]
                 if any("jobsets" in rule["resources"] for rule in hook["rules"])]
        for hook in hooks:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": base_url + path,
                                    "caBundle": base64.b64encode(ca_pem).decode()}
        doc["metadata"] = {"name": f"jobset-local-{doc['metadata']['name']}"}
        found.append({**doc, "webhooks": hooks})
    return found


@contextmanager
def running_jobset_operator(cluster: LocalCluster,
                            work_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Install JobSet's CRD and its JobSet webhooks, and run its manager until the block
    ends; its log goes to `work_dir`."""
    module = JOBSET.install(cluster)
    certs = work_dir / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    ca = pki.new_ca("jobset-webhook-ca")
    pki.serving_cert(ca, "jobset-webhook", ["127.0.0.1"]).write(certs / "tls.crt",
                                                                 certs / "tls.key")
    port = free_port()
    config = work_dir / "config.yaml"
    config.write_text(
        "apiVersion: config.jobset.x-k8s.io/v1alpha1\nkind: Configuration\n"
        "leaderElection: {leaderElect: false}\ninternalCertManagement: {enable: false}\n"
        f"webhook: {{port: {port}, host: 127.0.0.1, certDir: {certs}}}\n"
        f"metrics: {{bindAddress: '127.0.0.1:{free_port()}'}}\n"
        f"health: {{healthProbeBindAddress: '127.0.0.1:{free_port()}'}}\n")
    registrations = work_dir / "webhooks.yaml"
    registrations.write_text(yaml_text.dump_all(
        _jobset_webhooks(module, f"https://127.0.0.1:{port}", ca.cert_pem)))
    with running_manager(JOBSET, cluster, [f"--config={config}"], work_dir) as process:
        try:
            cluster.kubectl("apply", "-f", str(registrations))
            wait_serving(process, port, "JobSet's webhook server")
            yield process
        finally:
            cluster.kubectl("delete", "--ignore-not-found", "-f", str(registrations),
                            check=False)
