"""Shared pieces of the control-plane benchmarks (`bench_kueue_shape.py`, `bench_fill.py`,
`bench_kueue_side_by_side.py`): a local control plane with admitter's CRDs, the controller as a
separate process that reports its API writes, list-then-watch loops, and summary statistics.

The controller runs in its own process (as `admitter run` would) so the load generator in the
benchmark process does not share its interpreter. Run this file directly to get that process:
`python benchmarks/common.py controller --kubeconfig K --stats S [--settings JSON]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from admitter.controller.kube import Kind, Kube, Obj  # noqa: E402
from admitter.testing import GpuNodeLayout, LocalCluster  # noqa: E402

ADMITTER_API = "admitter.dev/v1alpha1"
QUEUE_LABEL = "admitter.dev/queue-name"
ADMIN_USER = "admitter-admin"
"""The local cluster's admin identity, which the benchmarks' controller uses."""


# ---- the control plane ---------------------------------------------------------------------


@contextlib.contextmanager
def control_plane(layout: GpuNodeLayout, crd_dirs: tuple[Path, ...] = (ROOT / "crds",),
                  keep: bool = False) -> Iterator[LocalCluster]:
    """A fresh local cluster with `layout`'s nodes and the CRDs in `crd_dirs` Established."""
    state = Path(tempfile.mkdtemp(prefix="admitter-bench-"))
    try:
        with LocalCluster.start(state / "cluster", layout, timeout=600) as cluster:
            for directory in crd_dirs:
                cluster.kubectl("apply", "--server-side", "-f", str(directory))
            cluster.kubectl("wait", "--for=condition=Established", "crd", "--all",
                            "--timeout=120s")
            yield cluster
    finally:
        if not keep:
            subprocess.run(["rm", "-rf", str(state)], check=False)


WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "APPLY")


def api_writes(cluster: LocalCluster) -> int:
    """Writes the API server has served so far, from every client (its own metrics)."""
    text = cluster.api().request("GET", "/metrics")
    total = 0.0
    for line in str(text).splitlines():
        if line.startswith("apiserver_request_total{") and any(
                f'verb="{verb}"' in line for verb in WRITE_VERBS):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def node_layout(nodes: int, cpu: int, gpus: int = 0, pods: int = 256) -> GpuNodeLayout:
    return GpuNodeLayout(nodes=nodes, gpus_per_node=gpus, cpu=str(cpu), pods=pods,
                         nodes_per_rack=max(1, nodes), racks_per_block=1)


def cluster_queue(name: str, resource: str, quota: int, limit: int | None = None,
                  parent: str | None = None) -> Obj:
    knobs: dict[str, Any] = {"quota": quota}
    if limit is not None:
        knobs["limit"] = limit
    spec: dict[str, Any] = {"resources": {resource: knobs}}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": ADMITTER_API, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": spec}


def local_queue(namespace: str, cq: str, name: str = "default") -> Obj:
    return {"apiVersion": ADMITTER_API, "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cq}}


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


# ---- the controller process ----------------------------------------------------------------


@dataclass
class ControllerStats:
    writes: int = 0
    passes: int = 0
    cycle_seconds: float = 0.0
    admissions: int = 0
    evictions: int = 0
    cpu_seconds: float = 0.0
    by_kind: dict[str, int] = field(default_factory=dict)
    """Writes per `VERB plural[/subresource]`."""


class ControllerProcess:
    """admitter's Reconciler in a child process; `stop()` returns what it counted."""

    def __init__(self, kubeconfig: Path, workdir: Path, settings: dict[str, Any],
                 profile: Path | None = None, webhooks: bool = False,
                 quiet_pending: bool = False) -> None:
        self.stats_path = workdir / "controller-stats.json"
        self.log_path = workdir / "controller.log" if profile is None else \
            profile.with_suffix(".log")
        argv = [sys.executable, __file__, "controller", "--kubeconfig", str(kubeconfig),
                "--stats", str(self.stats_path), "--settings", json.dumps(settings)]
        if profile is not None:
            argv += ["--profile", str(profile)]
        if webhooks:
            argv += ["--webhooks", str(workdir / "webhook-certs")]
        if quiet_pending:
            argv.append("--quiet-pending")
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def stats(self) -> ControllerStats:
        try:
            return ControllerStats(**json.loads(self.stats_path.read_text()))
        except (OSError, ValueError):
            return ControllerStats()

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> ControllerStats:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(300)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()
        return self.stats()


def _accept_standalone_workloads() -> None:
    """Let Workloads without an owning Job into the snapshot (Kueue's suite creates such).

    The controller leaves out every Workload whose Job it cannot find (an orphan awaiting
    garbage collection), which includes Workloads that never had a Job. Until it tells the
    two apart, the benchmark's controller process does: a Workload with no ownerReferences is
    given a stand-in Job that reports its pods ready. Admissions and evictions still look the
    Job up through the real caches, find none, and write only the Workload's status.
    """
    from admitter.controller import reconciler, snapshot

    standin: Obj = {"metadata": {"namespace": "", "name": ""}, "status": {"ready": 1 << 30}}

    class Standalone:
        def __init__(self, caches: Any) -> None:
            self._caches = caches

        def __getattr__(self, name: str) -> Any:
            return getattr(self._caches, name)

        def job_of(self, workload: Obj) -> Obj | None:
            job: Obj | None = self._caches.job_of(workload)
            if job is None and not workload["metadata"].get("ownerReferences"):
                return standin
            return job

    original: Callable[..., Any] = snapshot.build_view
    reconciler.build_view = lambda caches, settings, now: original(
        Standalone(caches), settings, now)


def _count_writes(tally: dict[str, int]) -> None:
    """Tally the controller's writes by verb and resource."""
    request = Kube.request

    async def counted(self: Kube, method: str, path: str, *args: Any, **kwargs: Any) -> Obj:
        if method != "GET":
            parts = path.split("/")
            plural = parts[-1] if method == "POST" else parts[-2]
            if parts[-1] == "status":
                plural = parts[-3] + "/status"
            key = f"{method} {plural}"
            tally[key] = tally.get(key, 0) + 1
        return await request(self, method, path, *args, **kwargs)

    Kube.request = counted  # type: ignore[method-assign]


async def _serve_webhooks(client: Kube, settings: Any, cert_dir: Path) -> Any:
    """admitter's webhooks in this process (as every `admitter run` replica serves them),
    registered from deploy/webhooks.yaml with a 127.0.0.1 url instead of the Service."""
    import base64
    import datetime as dt

    import yaml

    from admitter.commands.certs import mint, write
    from admitter.webhook.lookup import ApiLookup
    from admitter.webhook.server import start_webhook_server

    cert_dir.mkdir(parents=True, exist_ok=True)
    certs = mint("admitter-webhook", "admitter-system", dt.timedelta(hours=2))
    write(certs, cert_dir)
    runner = await start_webhook_server(settings, ApiLookup(client.api), cert_dir, 0,
                                        host="127.0.0.1", controller_usernames=[ADMIN_USER])
    base = f"https://127.0.0.1:{runner.addresses[0][1]}"
    bundle = base64.b64encode(certs.ca.cert_pem).decode()
    for doc in yaml.safe_load_all((ROOT / "deploy" / "webhooks.yaml").read_text()):
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": base + path, "caBundle": bundle}
        plural = doc["kind"].lower() + "s"
        await client.request("POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", doc)
    return runner


async def _controller_main(args: argparse.Namespace) -> None:
    from admitter.api.settings import Settings
    from admitter.controller import reconciler as module
    from admitter.controller.reconciler import Reconciler

    _accept_standalone_workloads()
    stats = ControllerStats()
    timed_cycle = module.run_cycle

    def run_cycle(snapshot: Any) -> Any:
        began = time.perf_counter()
        try:
            return timed_cycle(snapshot)
        finally:
            stats.cycle_seconds += time.perf_counter() - began

    module.run_cycle = run_cycle
    _count_writes(stats.by_kind)
    client = await Kube.from_kubeconfig(args.kubeconfig)
    settings = Settings.model_validate(json.loads(args.settings))
    reconciler = Reconciler(client, settings, "bench")
    if args.quiet_pending:  # an experiment: what the pending-reason writes cost
        async def unexplained(*_: Any) -> None:
            return None

        reconciler._explain = unexplained  # type: ignore[method-assign,assignment]
    webhooks = None
    if args.webhooks:
        webhooks = await _serve_webhooks(client, settings, Path(args.webhooks))

    def write_stats() -> None:
        samples = {s.name: s.value for m in reconciler.metrics.registry.collect()
                   for s in m.samples if s.name.endswith("_total")}
        stats.writes, stats.passes = client.writes, reconciler.passes
        stats.admissions = int(sum(v for k, v in samples.items() if "admitted" in k))
        stats.evictions = int(sum(v for k, v in samples.items() if "evicted" in k))
        stats.cpu_seconds = time.process_time()
        Path(args.stats).write_text(json.dumps(stats.__dict__))

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    tasks = [asyncio.create_task(reconciler.run_informers()),
             asyncio.create_task(reconciler.run())]
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
        write_stats()
        for task in tasks:
            if task.done() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    write_stats()
    if webhooks is not None:
        await webhooks.cleanup()
    await client.close()


def _controller_process(args: argparse.Namespace) -> None:
    if not args.profile:
        asyncio.run(_controller_main(args))
        return
    from pyinstrument import Profiler

    profiler = Profiler(async_mode="disabled")
    with profiler:
        asyncio.run(_controller_main(args))
    Path(args.profile).write_text(profiler.output_text(unicode=True, show_all=False))


# ---- watching and timing -------------------------------------------------------------------


async def follow(client: Kube, kind: Kind, on_object: Callable[[str, Obj], None],
                 query: dict[str, str] | None = None) -> None:
    """List, then watch `kind` forever, calling `on_object(event_type, obj)` for each; a
    failed list (a new CRD's cache still initialising) or an expired watch starts over."""
    from kubernetes_asyncio.client.exceptions import ApiException

    version = ""
    while True:
        try:
            if not version:
                listed = await client.list(kind, query)
                for item in listed.get("items", []):
                    on_object("ADDED", item)
                version = listed["metadata"]["resourceVersion"]
            async for event in client.watch(kind, version, query):
                obj = event["object"]
                version = obj["metadata"]["resourceVersion"]
                if event["type"] != "BOOKMARK":
                    on_object(event["type"], obj)
        except ApiException as error:
            if error.status == 410:
                version = ""
            elif error.status not in (429, 500, 503):
                raise
            await asyncio.sleep(0.5)


async def bounded(calls: list[Awaitable[Any]], limit: int = 32) -> list[Any]:
    """Await `calls` with at most `limit` in flight."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Awaitable[Any]) -> Any:
        async with gate:
            return await call

    return list(await asyncio.gather(*(one(c) for c in calls)))


@contextlib.asynccontextmanager
async def background(*coroutines: Awaitable[Any]) -> AsyncIterator[list[asyncio.Task[Any]]]:
    """Run coroutines as tasks for the duration of the block, then cancel them."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def wait_until(condition: Callable[[], bool], timeout: float, what: str,
                     tasks: list[asyncio.Task[Any]] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for task in tasks or []:
            if task.done():
                task.result()  # a crashed watcher or generator ends the wait with its error
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def machine() -> str:
    load = os.getloadavg()
    return f"{os.cpu_count()} cores, load {load[0]:.1f} at start, Python {sys.version.split()[0]}"


def main() -> None:
    parser = argparse.ArgumentParser(description="the benchmarks' controller process")
    sub = parser.add_subparsers(required=True)
    run = sub.add_parser("controller")
    run.add_argument("--kubeconfig", required=True)
    run.add_argument("--stats", required=True)
    run.add_argument("--settings", default="{}")
    run.add_argument("--profile")
    run.add_argument("--webhooks", help="serve and register admitter's webhooks; cert dir")
    run.add_argument("--quiet-pending", action="store_true",
                     help="experiment: skip the pending-reason status writes and events")
    run.set_defaults(handler=_controller_process)
    args = parser.parse_args()
    args.handler(args)


if __name__ == "__main__":
    main()
