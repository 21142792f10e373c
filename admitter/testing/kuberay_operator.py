"""KubeRay's real operator (built by hack/kuberay/build.sh) running against a local control
plane, for the tests and the demo that run RayJobs. It needs no webhook: KubeRay's own
webhooks are optional and off unless its deployment turns them on."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from admitter.testing.cluster import LocalCluster
from admitter.testing.operators import Operator, free_port, running_manager, wait_serving

KUBERAY = Operator(name="kuberay", module="github.com/ray-project/kuberay/ray-operator",
                   crd_paths=("config/crd/bases",),
                   crds=("rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io"))


@contextmanager
def running_kuberay_operator(cluster: LocalCluster,
                             work_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Install the RayCluster, RayJob and RayService CRDs and run the operator (watching
    every namespace) until the block ends; its log goes to `work_dir`."""
    KUBERAY.install(cluster)
    probe = free_port()
    args = ["--enable-leader-election=false", f"--metrics-addr=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{probe}"]
    with running_manager(KUBERAY, cluster, args, work_dir) as process:
        wait_serving(process, probe, "KubeRay's operator")
        yield process
