"""`make demo`: the product working on an embedded default.

Starts the local control plane (8 KWOK nodes × 8 GPUs in 4 racks and 2 blocks), installs the
CRDs and the sample queue tree, runs the admitter controller with its webhooks registered in
the API server (by URL, as `admitter run --webhook-url-host` does) and JobSet's controller, submits
a mix of Jobs from two teams (a rack-pinned gang, training jobs, an unfunded job, more demand than
capacity) and a leader-and-workers JobSet (examples/manifests/jobset.yaml), serves
`admitter dashboard` on it (its URL printed first) and tells how many Jobs run and wait as
they start, finish and get reclaimed; it ends with `kubectl admitter queues` and one
`kubectl admitter explain`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import yaml
from rich.console import Console
from rich.rule import Rule

from admitter.api.settings import Settings
from admitter.commands.dashboard import DEFAULT_PORT, dashboard
from admitter.jobs.jobset import JobSet
from admitter.jobs.workloads import resource_of
from admitter.kube.client import JOBS, WORKLOADS, Kube
from admitter.kube.objects import Obj
from admitter.kubectl.state import job_name, phase
from admitter.testing.cluster import LocalCluster
from admitter.testing.in_process import in_process_controller
from admitter.testing.jobset_operator import running_jobset_operator
from admitter.testing.nodes import GPU_RESOURCE, RACK_LABEL, SIMULATED_RUNTIME_ANNOTATION
from admitter.testing.webhooks import admitter_webhooks

ADMIN_USERNAME = "admitter-admin"
"""The local control plane's admin: the demo's controller runs as it."""

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_WIDTH = 150
"""Columns `kubectl admitter` lays out its output in when the demo's is not a terminal."""


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
JOBSET = yaml.safe_load((ROOT / "examples" / "manifests" / "jobset.yaml").read_text())
"""Submitted beside the Jobs, as written (not suspended): the webhook suspends it."""


def kubectl(cluster: LocalCluster, *args: str) -> str:
    return cluster.kubectl(*args).stdout


def install(cluster: LocalCluster) -> None:
    kubectl(cluster, "apply", "-f", str(ROOT / "crds"))
    cluster.wait_established()
    kubectl(cluster, "apply", "-k", str(ROOT / "deploy" / "samples"))


@contextlib.asynccontextmanager
async def demo_dashboard(cluster: LocalCluster) -> AsyncIterator[str]:
    """The dashboard on its usual port, or any free one if that is taken."""
    kubeconfig = str(cluster.kubeconfig_path)
    try:
        async with dashboard(kubeconfig, "127.0.0.1", DEFAULT_PORT) as url:
            yield url
    except OSError:
        async with dashboard(kubeconfig, "127.0.0.1", 0) as url:
            yield url


async def run(cluster: LocalCluster, seconds: float, console: Console) -> None:
    settings = Settings(cycle=2.0)
    async with demo_dashboard(cluster) as url, in_process_controller(
            cluster.kubeconfig_path, settings, "demo") as reconciler:
        console.print(f"[bold]dashboard: {url}[/] (live while the demo runs)")
        console.print(kubectl(cluster, "get", "nodes", "-L",
                              "topology.admitter.dev/block,topology.admitter.dev/rack"))
        client = reconciler.kube
        async with admitter_webhooks(client.api, settings, cluster.state_dir / "webhook-certs",
                                     [ADMIN_USERNAME]) as port:
            console.print(f"webhooks registered at https://127.0.0.1:{port}: the Jobs are "
                          "created running, the mutating webhook suspends them")
            await submit_and_watch(cluster, client, seconds, console)


def kubectl_admitter(cluster: LocalCluster, width: int, *args: str) -> str:
    """`kubectl admitter ARGS` laid out `width` columns wide: kubectl finds the plugin next
    to this Python."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
           "KUBECONFIG": str(cluster.kubeconfig_path), "COLUMNS": str(width)}
    done = subprocess.run([str(cluster.binaries.kubectl), "admitter", *args],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    return done.stdout + done.stderr


async def submit_and_watch(cluster: LocalCluster, client: Kube, seconds: float,
                           console: Console) -> None:
    for job in JOBS_TO_SUBMIT:
        await client.create(JOBS, job)
    await client.create(resource_of(JobSet()), JOBSET)
    console.print(f"submitted {len(JOBS_TO_SUBMIT)} Jobs (team-a, team-b) and JobSet "
                  f"{JOBSET['metadata']['name']} (team-a, 1 leader + 2 x 4 workers); "
                  "admitter decides")
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        await asyncio.sleep(10)
        workloads = (await client.list(WORKLOADS))["items"]
        phases = [phase(wl) for wl in workloads]
        evicted = sum((wl.get("status") or {}).get("evictionCount", 0) for wl in workloads)
        console.print(f"t = {time.monotonic() - began:3.0f}s: {phases.count('Admitted')} "
                      f"running, {phases.count('Pending')} waiting, "
                      f"{phases.count('Finished')} finished, {evicted} evictions so far")
    console.print(Rule("kubectl admitter queues"))
    width = console.width if console.is_terminal else PLUGIN_WIDTH
    print(kubectl_admitter(cluster, width, "queues"), end="", flush=True)
    workloads = (await client.list(WORKLOADS))["items"]
    chosen = min(workloads, key=lambda wl: (phase(wl) != "Pending",
                                            -(wl.get("status") or {}).get("evictionCount", 0),
                                            wl["metadata"]["name"]))
    name, namespace = job_name(chosen) or chosen["metadata"]["name"], chosen["metadata"][
        "namespace"]
    console.print(Rule(f"kubectl admitter explain {name} -n {namespace}"))
    print(kubectl_admitter(cluster, width, "explain", name, "-n", namespace), end="")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=90.0, help="how long to watch")
    args = parser.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory(prefix="admitter-demo-") as state, LocalCluster.start(
            Path(state)) as cluster:
        install(cluster)
        with running_jobset_operator(cluster, Path(state) / "jobset"):
            asyncio.run(run(cluster, args.seconds, console))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
