"""`make demo`: the product working on an embedded default.

Starts the local control plane (8 KWOK nodes × 8 GPUs in 4 racks and 2 blocks), installs the
CRDs and the sample queue tree, runs the admitter controller with its webhooks registered in
the API server (by URL, as `admitter run --webhook-url-host` does), submits a mix of Jobs from two
teams (a rack-pinned gang, training jobs, an unfunded job, more demand than capacity) and shows
`kubectl get cq`, the Workloads and the Jobs as they start, finish and get reclaimed.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.rule import Rule

from admitter.api.settings import Settings
from admitter.controller.kube import JOBS, Kube, Obj
from admitter.testing.cluster import LocalCluster
from admitter.testing.in_process import in_process_controller
from admitter.testing.nodes import GPU_RESOURCE, RACK_LABEL, SIMULATED_RUNTIME_ANNOTATION
from admitter.testing.webhooks import admitter_webhooks

ADMIN_USERNAME = "admitter-admin"
"""The local control plane's admin: the demo's controller runs as it."""

ROOT = Path(__file__).resolve().parents[2]


def demo_job(namespace: str, name: str, pods: int, gpus: int, runtime: str, min_runtime: str,
             required: str | None = None) -> Obj:
    """A Job as a researcher writes it: admitter's mutating webhook suspends it."""
    annotations = {"admitter.dev/min-runtime": min_runtime}
    if required:
        annotations["admitter.dev/topology-required"] = required
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"admitter.dev/queue-name": "default"},
                     "annotations": annotations},
        "spec": {
            "parallelism": pods, "completions": pods,
            "template": {
                "metadata": {"annotations": {SIMULATED_RUNTIME_ANNOTATION: runtime}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "train", "image": "registry.invalid/train",
                    "resources": {"limits": {GPU_RESOURCE: str(gpus)}}}]},
            },
        },
    }


JOBS_TO_SUBMIT = [
    demo_job("team-a", "llm-pretrain", pods=2, gpus=8, runtime="40s", min_runtime="20s",
             required=RACK_LABEL),
    demo_job("team-a", "finetune", pods=1, gpus=4, runtime="25s", min_runtime="10s"),
    demo_job("team-b", "vision-sweep", pods=4, gpus=8, runtime="60s", min_runtime="15s"),
    demo_job("team-b", "ablation", pods=2, gpus=8, runtime="30s", min_runtime="15s"),
    demo_job("team-b", "notebook", pods=1, gpus=2, runtime="90s", min_runtime="0"),
    demo_job("team-a", "eval", pods=3, gpus=8, runtime="20s", min_runtime="10s"),
]


def kubectl(cluster: LocalCluster, *args: str) -> str:
    return cluster.kubectl(*args).stdout


def install(cluster: LocalCluster) -> None:
    kubectl(cluster, "apply", "-f", str(ROOT / "crds"))
    kubectl(cluster, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    kubectl(cluster, "apply", "-k", str(ROOT / "deploy" / "samples"))


async def run(cluster: LocalCluster, seconds: float, console: Console) -> None:
    settings = Settings(cycle=2.0)
    async with in_process_controller(cluster.kubeconfig_path, settings, "demo") as reconciler:
        client = reconciler.kube
        async with admitter_webhooks(client.api, settings, cluster.state_dir / "webhook-certs",
                                     [ADMIN_USERNAME]) as port:
            console.print(f"webhooks registered at https://127.0.0.1:{port}: the Jobs are "
                          "created running, the mutating webhook suspends them")
            await submit_and_watch(cluster, client, seconds, console)


async def submit_and_watch(cluster: LocalCluster, client: Kube, seconds: float,
                           console: Console) -> None:
    for job in JOBS_TO_SUBMIT:
        await client.create(JOBS, job)
    console.print(f"submitted {len(JOBS_TO_SUBMIT)} Jobs (team-a, team-b); admitter decides")
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        await asyncio.sleep(10)
        elapsed = time.monotonic() - began
        console.print(Rule(f"t = {elapsed:.0f}s"))
        console.print(kubectl(cluster, "get", "cq"))
        console.print(kubectl(cluster, "get", "jobs", "-A", "-o", "custom-columns="
                              "NAMESPACE:.metadata.namespace,JOB:.metadata.name,"
                              "SUSPENDED:.spec.suspend,ACTIVE:.status.active,"
                              "SUCCEEDED:.status.succeeded"))
    console.print(Rule("why Workloads wait or were evicted"))
    console.print(kubectl(cluster, "get", "workloads", "-A"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=90.0, help="how long to watch")
    args = parser.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory(prefix="admitter-demo-") as state, LocalCluster.start(
            Path(state)) as cluster:
        console.print(Rule("local control plane"))
        console.print(kubectl(cluster, "get", "nodes", "-L",
                              "topology.admitter.dev/block,topology.admitter.dev/rack"))
        install(cluster)
        asyncio.run(run(cluster, args.seconds, console))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
