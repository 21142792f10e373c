"""admitter's controller as its own process for the benchmarks, reporting what it did.

The controller runs apart from the load generator (as `admitter run` would), so the two do not
share an interpreter. The parent starts `python benchmarks/controller_process.py --kubeconfig K
--stats S [--settings JSON]`; the child runs the Reconciler and every second writes its API
writes (by verb and resource), passes, admissions, evictions, CPU time and the wall time of
each step of a pass to S.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from admitter.kube.client import Kube, Obj  # noqa: E402

ADMIN_USER = "admitter-admin"
"""The local cluster's admin identity, which the benchmarks' controller uses."""

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
    phases: dict[str, float] = field(default_factory=dict)
    """Wall seconds spent in each step of the reconcile pass, summed over passes."""


def describe(stats: ControllerStats) -> str:
    """Writes per admission by kind, and where the passes' wall time went."""
    per = max(stats.admissions, 1)
    top = sorted(stats.by_kind.items(), key=lambda kv: -kv[1])
    writes = ", ".join(f"{k} {v / per:.2f}" for k, v in top if v / per >= 0.005)
    steps = {**stats.phases, "run_cycle": stats.cycle_seconds}
    order = ("ensure_workloads", "converge_jobs", "build_view", "run_cycle", "apply")
    timing = ", ".join(f"{k} {steps[k]:.1f}" for k in order if k in steps)
    return f"writes per admission: {writes}\n  pass wall seconds: {timing}"


class ControllerProcess:
    """admitter's Reconciler in a child process; `stop()` returns what it counted."""

    def __init__(self, kubeconfig: Path, workdir: Path, settings: dict[str, Any],
                 profile: Path | None = None, webhooks: bool = False,
                 quiet_pending: bool = False) -> None:
        self.stats_path = workdir / "controller-stats.json"
        self.log_path = workdir / "controller.log" if profile is None else \
            profile.with_suffix(".log")
        argv = [sys.executable, __file__, "--kubeconfig", str(kubeconfig),
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
            data = json.loads(self.stats_path.read_text())
            return ControllerStats(**{k: v for k, v in data.items()
                                      if k in ControllerStats.__dataclass_fields__})
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


def _count_writes(tally: dict[str, int]) -> None:
    """Tally the writes of every `Kube` in this process (only the controller's, once the
    webhooks are registered: their server reads through its own client) by verb and resource."""
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


def _time_phases(reconciler: Any, phases: dict[str, float]) -> None:
    """Sum the wall time of each step of a pass (the cycle itself is timed apart; Workload
    creations run in the background, so only starting them is timed)."""
    from admitter.controller import reconciler as module

    def add(name: str, began: float) -> None:
        phases[name] = phases.get(name, 0.0) + time.perf_counter() - began

    for name in ("converge_jobs", "apply"):
        step = getattr(reconciler, name)

        async def timed(*args: Any, _step: Any = step, _name: str = name) -> Any:
            began = time.perf_counter()
            try:
                return await _step(*args)
            finally:
                add(_name, began)

        setattr(reconciler, name, timed)
    for owner, name in ((reconciler, "ensure_workloads"), (module, "build_view")):
        plain: Callable[..., Any] = getattr(owner, name)

        def timed_plain(*args: Any, _step: Any = plain, _name: str = name) -> Any:
            began = time.perf_counter()
            try:
                return _step(*args)
            finally:
                add(_name, began)

        setattr(owner, name, timed_plain)


async def _serve_webhooks(kubeconfig: str, settings: Any, cert_dir: Path) -> Any:
    """admitter's webhooks in this process, on their own thread and loop (as every `admitter
    run` replica serves them), registered from deploy/webhooks.yaml with a 127.0.0.1 url
    instead of the Service."""
    import base64
    import contextlib
    import datetime as dt

    import yaml

    from admitter.commands.certs import mint, write
    from admitter.webhook.lookup import ApiLookup, SharedReads
    from admitter.webhook.server import start_webhook_server
    from admitter.webhook.thread import WebhookThread

    cert_dir.mkdir(parents=True, exist_ok=True)
    certs = mint("admitter-webhook", "admitter-system", dt.timedelta(hours=2))
    write(certs, cert_dir)

    @contextlib.asynccontextmanager
    async def serve() -> Any:
        own = await Kube.from_kubeconfig(kubeconfig)
        runner = await start_webhook_server(settings, SharedReads(ApiLookup(own.api)), cert_dir, 0,
                                            host="127.0.0.1", controller_usernames=[ADMIN_USER])
        try:
            yield runner
        finally:
            await runner.cleanup()
            await own.close()

    thread = WebhookThread(serve)
    runner = await thread.start()
    base = f"https://127.0.0.1:{runner.addresses[0][1]}"
    bundle = base64.b64encode(certs.ca.cert_pem).decode()
    client = await Kube.from_kubeconfig(kubeconfig)
    for doc in yaml.safe_load_all((ROOT / "deploy" / "webhooks.yaml").read_text()):
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": base + path, "caBundle": bundle}
        plural = doc["kind"].lower() + "s"
        await client.request("POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", doc)
    await client.close()
    return thread


async def _controller_main(args: argparse.Namespace) -> None:
    from admitter.api.settings import Settings
    from admitter.controller.reconciler import Reconciler
    from admitter.core.cycle import run_cycle
    from admitter.core.decisions import CycleResult, Snapshot

    stats = ControllerStats()

    def timed_cycle(snapshot: Snapshot) -> CycleResult:
        began = time.perf_counter()
        try:
            return run_cycle(snapshot)
        finally:
            stats.cycle_seconds += time.perf_counter() - began

    client = await Kube.from_kubeconfig(args.kubeconfig)
    settings = Settings.model_validate(json.loads(args.settings))
    reconciler = Reconciler(client, settings, "bench", decide=timed_cycle)
    if args.quiet_pending:  # an experiment: what the pending-reason writes cost
        async def unexplained(*_: Any) -> None:
            return None

        reconciler._explain = unexplained  # type: ignore[method-assign,assignment]
    webhooks = None
    if args.webhooks:
        webhooks = await _serve_webhooks(args.kubeconfig, settings, Path(args.webhooks))
    _count_writes(stats.by_kind)  # after the webhooks' registration: the controller's own only

    admit, evict = reconciler.metrics.observe_admission, reconciler.metrics.observe_eviction

    def admitted(*args: Any) -> None:
        stats.admissions += 1
        admit(*args)

    def evicted(*args: Any) -> None:
        stats.evictions += 1
        evict(*args)

    _time_phases(reconciler, stats.phases)
    reconciler.metrics.observe_admission = admitted  # type: ignore[method-assign]
    reconciler.metrics.observe_eviction = evicted  # type: ignore[method-assign]

    def write_stats() -> None:
        stats.writes, stats.passes = sum(stats.by_kind.values()), reconciler.passes
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
    _, stuck = await asyncio.wait(tasks, timeout=15.0)
    for task in stuck:  # say where, and stop anyway: the run's figures are already taken
        print(f"controller task did not stop when cancelled: {task!r}", flush=True)
        task.print_stack(file=sys.stdout)
    write_stats()
    if webhooks is not None:
        await webhooks.stop()
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


def main() -> None:
    run = argparse.ArgumentParser(description="the benchmarks' controller process")
    run.add_argument("--kubeconfig", required=True)
    run.add_argument("--stats", required=True)
    run.add_argument("--settings", default="{}")
    run.add_argument("--profile")
    run.add_argument("--webhooks", help="serve and register admitter's webhooks; cert dir")
    run.add_argument("--quiet-pending", action="store_true",
                     help="experiment: skip the pending-reason status writes and events")
    _controller_process(run.parse_args())


if __name__ == "__main__":
    main()
