"""Queues as real clusters use them, on the real control plane, with `admitter run` as its own
process serving the webhooks and registering them itself (`--webhook-url-host`): pending Jobs
move between LocalQueues, queues in use survive their deletion until their Workloads are
gone, administrators set the non-preemptible priority and a default min runtime, and
`kubectl get` shows what is going on."""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from admitter_world import ControllerProcess, apply_all, jobs, priority_class, running, workloads
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.contract import MIN_RUNTIME_ANNOTATION, QUEUE_LABEL
from admitter.api.settings import Settings
from admitter.api.workload import (
    CONDITION_ACTIVE,
    CONDITION_EVICTED,
    CONDITION_QUOTA_RESERVED,
    Reason,
)
from admitter.cli import main
from admitter.controller.queue_holds import IN_USE_FINALIZER
from admitter.core.decisions import EvictionReason, PendingReason
from admitter.jobs.workloads import workload_name
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.names import CA_FILE, WEBHOOK_CONFIGURATION
from admitter.kube.objects import Obj
from admitter.testing import LocalCluster
from admitter.testing.demo import ADMIN_USERNAME
from admitter.testing.waiting import eventually
from admitter.testing.webhooks import admitter_webhooks

from builders.core import LEVELS
from builders.kube import JobWrapper, leaf_queue, topology

pytestmark = pytest.mark.integration
ADMIN = ADMIN_USERNAME  # the launcher's identity: the controller's, and here the user's too


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _denial(error: ApiException) -> str:
    message: str = json.loads(error.body or str(error.reason))["message"]  # Kube: in reason
    return message


@contextlib.asynccontextmanager
async def controller_with_webhooks(local_cluster: LocalCluster, api: Kube, namespace: str,
                                   tmp_path: Path, settings_yaml: str = "cycle: 1s\n",
                                   ) -> AsyncIterator[tuple[int, Path]]:
    """`admitter run` outside the cluster with its webhooks registered by URL; yields their
    port and the certificate directory. The configurations go when it stops, so the
    session's other tests are not held by webhooks nobody serves."""
    certs = tmp_path / f"certs-{secrets.token_hex(2)}"
    assert main(["certs", "--out", str(certs)]) == 0
    port = _free_port()
    process = ControllerProcess(
        local_cluster.kubeconfig_path, certs.with_suffix(".log"), "--no-leader-elect",
        "--webhook-cert-dir", str(certs), "--webhook-address", f"127.0.0.1:{port}",
        "--webhook-url-host", f"127.0.0.1:{port}", "--controller-username", ADMIN,
        settings_yaml=settings_yaml)
    try:
        async def answering() -> bool:
            assert process.alive(), certs.with_suffix(".log").read_text()[-3000:]
            probe = JobWrapper("probe", namespace).queue("no-such-queue").obj()
            try:
                await api.request("POST", kube.JOBS.path(namespace), probe,
                                  query={"dryRun": "All"})
            except ApiException as error:
                return error.status == 422 and "no-such-queue" in _denial(error)
            return False

        await eventually(answering, "the webhooks registered and answering", timeout=60)
        yield port, certs
    finally:
        process.kill()
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            local_cluster.kubectl("delete", kind, WEBHOOK_CONFIGURATION, "--ignore-not-found")


async def _workload_of(api: Kube, namespace: str, job_name: str) -> Obj | None:
    job = (await jobs(api, namespace)).get(job_name)
    if job is None:
        return None
    found = [w for w in await workloads(api, namespace)
             if w["metadata"]["name"] == workload_name(job)]
    return found[0] if found else None


async def _status(api: Kube, kind: kube.Kind, name: str, namespace: str | None = None) -> Obj:
    found: Obj = await api.get(kind, name, namespace)
    return found.get("status") or {}


def _relabel(queue: str) -> Obj:
    return {"metadata": {"labels": {QUEUE_LABEL: queue}}}


async def test_the_url_webhooks_point_at_the_controller_with_its_ca(
        local_cluster: LocalCluster, api: Kube, namespace: str, tmp_path: Path) -> None:
    name = f"hooked-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, 8, namespace=namespace, local_name="hooked"))
    async with controller_with_webhooks(local_cluster, api, namespace, tmp_path) as (port, certs):
        mutating = await api.request(
            "GET", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
            f"{WEBHOOK_CONFIGURATION}")
        hook, placement = mutating["webhooks"]
        assert hook["clientConfig"]["url"] == f"https://127.0.0.1:{port}/mutate-jobs"
        assert placement["clientConfig"]["url"] == (
            f"https://127.0.0.1:{port}/mutate-pod-placement")
        for each in (hook, placement):
            assert base64.b64decode(each["clientConfig"]["caBundle"]) == (
                certs / CA_FILE).read_bytes()
        created = await api.create(kube.JOBS, JobWrapper("unsuspended", namespace)
                                   .queue("hooked").suspend(False).obj())
        assert created["spec"]["suspend"] is True, "the mutating webhook suspended it"


async def test_a_pending_job_moves_to_another_local_queue_and_an_admitted_one_cannot(
        local_cluster: LocalCluster, api: Kube, namespace: str, tmp_path: Path) -> None:
    """Before: the Workload kept its old queue and the old LocalQueue kept counting it."""
    suffix = secrets.token_hex(3)
    for letter in "ab":
        await apply_all(api, *leaf_queue(f"{letter}-{suffix}", 8, limit=8, namespace=namespace,
                                         local_name=letter))
    async with controller_with_webhooks(local_cluster, api, namespace, tmp_path):
        await apply_all(api, JobWrapper("first", namespace).queue("a").runtime("1h").obj())

        async def first_running() -> bool:
            return running((await jobs(api, namespace))["first"])

        await eventually(first_running, "the first Job to run in queue a", timeout=60)
        await apply_all(api, JobWrapper("second", namespace).queue("a").runtime("1h").obj())

        async def second_waits() -> bool:
            wl = await _workload_of(api, namespace, "second")
            return (wl is not None and (await _status(api, kube.LOCAL_QUEUES, "a", namespace)
                                        ).get("pendingWorkloads") == 1)

        await eventually(second_waits, "the second Job to wait for queue a's limit", 60)
        await api.patch(kube.JOBS, "second", _relabel("b"), namespace)

        async def moved_and_admitted() -> bool:
            wl = await _workload_of(api, namespace, "second")
            return (wl is not None and wl["spec"]["queueName"] == "b"
                    and bool((wl.get("status") or {}).get("admission"))
                    and running((await jobs(api, namespace))["second"]))

        await eventually(moved_and_admitted, "the Workload to follow its Job and run in b", 60)
        wl = await _workload_of(api, namespace, "second")
        assert wl is not None and wl["status"]["admission"]["clusterQueue"] == f"b-{suffix}"

        async def counts_follow() -> bool:
            a = await _status(api, kube.LOCAL_QUEUES, "a", namespace)
            b = await _status(api, kube.LOCAL_QUEUES, "b", namespace)
            return (a.get("pendingWorkloads"), a.get("admittedWorkloads"),
                    b.get("admittedWorkloads")) == (0, 1, 1)

        await eventually(counts_follow, "each LocalQueue to count its own Workloads", 60)
        with pytest.raises(ApiException) as denied:
            await api.patch(kube.JOBS, "first", _relabel("b"), namespace)
        assert "is admitted to LocalQueue 'a' and cannot move to 'b'" in _denial(denied.value)


async def test_a_queue_in_use_waits_for_its_workloads_before_it_goes(
        local_cluster: LocalCluster, api: Kube, namespace: str, tmp_path: Path) -> None:
    """Before: the ClusterQueue went at once, its running Jobs belonged to no queue and new
    Jobs were told `InvalidQueue: ... not a leaf`."""
    name = f"doomed-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, 16, namespace=namespace, local_name="doomed"))
    async with controller_with_webhooks(local_cluster, api, namespace, tmp_path):
        await apply_all(api, JobWrapper("runs", namespace).queue("doomed").runtime("1h").obj())

        async def held() -> bool:
            cq = await api.get(kube.CLUSTER_QUEUES, name)
            lq = await api.get(kube.LOCAL_QUEUES, "doomed", namespace)
            return all(IN_USE_FINALIZER in (o["metadata"].get("finalizers") or ())
                       for o in (cq, lq)) and running((await jobs(api, namespace))["runs"])

        await eventually(held, "the running Job's queues to carry the finalizer", 60)
        local_cluster.kubectl("delete", "clusterqueue", name, "--wait=false")
        local_cluster.kubectl("delete", "localqueue", "doomed", "-n", namespace, "--wait=false")
        running_wl = await _workload_of(api, namespace, "runs")
        assert running_wl is not None

        async def says_what_it_waits_for() -> Obj | None:
            conditions = (await _status(api, kube.CLUSTER_QUEUES, name)).get("conditions", [])
            active = next((c for c in conditions if c["type"] == CONDITION_ACTIVE), None)
            return active if active and active["reason"] == Reason.TERMINATING else None

        active = await eventually(says_what_it_waits_for, "the Terminating condition", 60)
        assert active["status"] == "False"
        assert f"waits for 1 admitted Workload(s) to finish or be evicted " \
               f"({namespace}/{running_wl['metadata']['name']})" in active["message"]
        assert running((await jobs(api, namespace))["runs"]), "its Job keeps running"
        with pytest.raises(ApiException) as denied:
            await apply_all(api, JobWrapper("late", namespace).queue("doomed").obj())
        assert "LocalQueue 'doomed' is being deleted" in _denial(denied.value)

        await api.request("DELETE", kube.JOBS.path(namespace, "runs"),
                          {"propagationPolicy": "Background"})

        async def gone() -> bool:
            for kind, queue, ns in ((kube.CLUSTER_QUEUES, name, None),
                                    (kube.LOCAL_QUEUES, "doomed", namespace)):
                try:
                    await api.get(kind, queue, ns)
                except ApiException as error:
                    if error.status != 404:
                        raise
                else:
                    return False
            return True

        await eventually(gone, "both queues to go once their Workload is gone", 90)


async def test_kueue_priorities_are_preemptible_once_the_threshold_says_so(
        local_cluster: LocalCluster, api: Kube, namespace: str, tmp_path: Path) -> None:
    """Before: PriorityClass values of 1000 and 10000 (Kueue's usual ones) were all at or
    above 100, so nothing was ever preempted, silently; the creation now warns, and the
    setting changes that."""
    await priority_class(api, "kueue-low", 1000)
    await priority_class(api, "kueue-high", 10000)
    name = f"whole-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, 64, namespace=namespace, local_name="all"))
    # 56 of the 64 GPUs: long starts leave 1 GPU for short jobs, so a seventh whole node is
    # the most long work fills; the urgent Job asks for two nodes.
    fill = [JobWrapper(f"low-{i}", namespace).queue("all").pods(4 - i).runtime("1h")
            .min_runtime("2s").priority_class("kueue-low").obj() for i in range(2)]
    urgent = (JobWrapper("urgent", namespace).queue("all").pods(2).runtime("1h")
              .priority_class("kueue-high").obj())
    async with controller_with_webhooks(local_cluster, api, namespace, tmp_path):
        await apply_all(api, *fill)

        async def cluster_full() -> bool:
            current = await jobs(api, namespace)
            return all(running(current[f"low-{i}"]) for i in range(2))

        await eventually(cluster_full, "two gangs to fill 56 of the 64 GPUs", 90)
        created = local_cluster.kubectl("create", "-f", "-", input=json.dumps(urgent))
        assert "Warning: PriorityClass 'kueue-high' has value 10000, at or above " \
               "nonPreemptiblePriority 100" in created.stderr, "not silently"

        async def urgent_explained() -> Obj | None:
            wl = await _workload_of(api, namespace, "urgent")
            shown = [c for c in ((wl or {}).get("status") or {}).get("conditions", [])
                     if c["type"] == CONDITION_QUOTA_RESERVED and c["status"] == "False"]
            return shown[0] if shown else None

        await eventually(urgent_explained, "the urgent Job's pending reason", 60)
        current = await jobs(api, namespace)
        assert all(running(current[f"low-{i}"]) for i in range(2)), \
            "with the default threshold (100), priority 1000 is never preempted"
    async with controller_with_webhooks(local_cluster, api, namespace, tmp_path,
                                        "cycle: 1s\nnonPreemptiblePriority: null\n"):
        async def urgent_running() -> bool:
            return running((await jobs(api, namespace))["urgent"])

        await eventually(urgent_running, "the urgent Job to preempt a low one", 90)
        evicted = [w for w in await workloads(api, namespace)
                   if any(c["type"] == CONDITION_EVICTED
                          and c["reason"] == EvictionReason.PREEMPTED.value
                          for c in (w.get("status") or {}).get("conditions", []))]
        assert len(evicted) == 1


async def test_a_queue_default_min_runtime_is_written_onto_jobs_that_declare_none(
        local_cluster: LocalCluster, api: Kube, namespace: str, tmp_path: Path) -> None:
    """Before: a Job without the annotation was unfunded, whatever its queue."""
    name = f"funded-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, 8, defaultMinRuntime="45m", namespace=namespace,
                                     local_name="funded"))
    job = JobWrapper("plain", namespace).queue("funded").min_runtime(None).obj()
    declared = JobWrapper("declared", namespace).queue("funded").min_runtime("0").obj()
    async with controller_with_webhooks(local_cluster, api, namespace, tmp_path):
        created = await api.create(kube.JOBS, job)
        kept = await api.create(kube.JOBS, declared)
        assert created["metadata"]["annotations"][MIN_RUNTIME_ANNOTATION] == "45m"
        assert kept["metadata"]["annotations"][MIN_RUNTIME_ANNOTATION] == "0"

        async def funded_workload() -> Obj | None:
            return await _workload_of(api, namespace, "plain")

        wl = await eventually(funded_workload, "the Workload of the defaulted Job", 60)
        assert wl["spec"]["minRuntime"] == "45m"


async def _table(api: Kube, path: str) -> dict[str, dict[str, Any]]:
    """What `kubectl get` prints, as the API server computes it from the printer columns (a
    Table): row name → column name → cell (None where kubectl prints `<none>`)."""
    response = await api.api.call_api(
        path, "GET", header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        auth_settings=["BearerToken"], _preload_content=False)
    async with response:
        table = json.loads(await response.read())
    names = [column["name"] for column in table["columnDefinitions"]]
    rows = [dict(zip(names, row["cells"], strict=True)) for row in table["rows"]]
    return {row["Name"]: row for row in rows}


async def test_kubectl_get_shows_zero_allocation_every_level_and_each_workloads_reason(
        local_cluster: LocalCluster, api: Kube, namespace: str, tmp_path: Path) -> None:
    """Before: GPU ALLOCATED was blank for an idle queue, `get topology` showed its first
    level only, finished Workloads showed ADMITTED False and `get wl` had no REASON."""
    name = f"shown-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, 8, limit=8, namespace=namespace, local_name="shown"))
    # Named to sort after any other: the controller decides with the first Topology by name.
    levels_name = f"zz-{name}"
    await apply_all(api, topology(levels_name, *LEVELS))
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(local_cluster.kubectl, "delete", "topology", levels_name)
        await stack.enter_async_context(
            controller_with_webhooks(local_cluster, api, namespace, tmp_path))
        await _shows_status(api, namespace, name, levels_name)


async def _shows_status(api: Kube, namespace: str, name: str, levels_name: str) -> None:
    """`kubectl get` of queue `name`, Topology `levels_name` and two Workloads."""
    async def idle_shown() -> dict[str, Any] | None:
        row = (await _table(api, kube.CLUSTER_QUEUES.path())).get(name)
        return row if row and row["Admitted"] is not None else None  # status written

    assert (await eventually(idle_shown, "the idle queue's status", 60))["GPU Allocated"] == "0"
    levels_row = (await _table(api, kube.TOPOLOGIES.path()))[levels_name]
    assert json.loads(levels_row["Levels"]) == [{"nodeLabel": level} for level in LEVELS]
    await apply_all(api, JobWrapper("quick", namespace).queue("shown").runtime("3s").obj())

    async def quick_admitted() -> bool:
        return bool(((await _workload_of(api, namespace, "quick") or {}).get("status")
                     or {}).get("admission"))

    await eventually(quick_admitted, "the quick Job to be admitted", 60)
    await apply_all(api, JobWrapper("waits", namespace).queue("shown").runtime("1h").obj())

    async def reasons_shown() -> dict[str, dict[str, Any]] | None:
        rows = await _table(api, kube.WORKLOADS.path(namespace))
        by_job: dict[str, dict[str, Any]] = {}
        for job_name in ("quick", "waits"):
            wl = await _workload_of(api, namespace, job_name)
            if wl is None or wl["metadata"]["name"] not in rows:
                return None
            by_job[job_name] = rows[wl["metadata"]["name"]]
        done = by_job["quick"]["Finished"] == "True"
        return by_job if done and by_job["waits"]["Reason"] is not None else None

    rows = await eventually(reasons_shown, "a finished and a waiting Workload", 90)
    assert (rows["quick"]["Admitted"], rows["quick"]["Reason"]) == ("True", Reason.FINISHED)
    # The queue's quota and limit are both 8: while the quick one held them, the waiting one's
    # reason names whichever bound the cycle found first (the limit, as the queue may not
    # borrow past it), and the reason shown may still be that one when the quick one finishes.
    assert rows["waits"]["Reason"] in (Reason.QUOTA_RESERVED, PendingReason.QUOTA_EXCEEDED,
                                       PendingReason.LIMIT_EXCEEDED), \
        "admitted once the quick one finished, or still waiting for the quota it held"


async def test_the_demos_webhooks_are_admitters_own_registered_by_url(
        local_cluster: LocalCluster, api: Kube, namespace: str, tmp_path: Path) -> None:
    """`make demo` runs the real path: Jobs created running come back suspended."""
    name = f"demo-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, 8, namespace=namespace, local_name="demo"))
    try:
        async with admitter_webhooks(api.api, Settings(), tmp_path / "demo-certs",
                                     [ADMIN_USERNAME]) as port:
            created = await api.create(kube.JOBS, JobWrapper("demo", namespace).queue("demo")
                                       .suspend(False).obj())
            assert created["spec"]["suspend"] is True
            with pytest.raises(ApiException) as denied:
                await api.create(kube.JOBS, JobWrapper("lost", namespace).queue("nope").obj())
            assert "LocalQueue 'nope' does not exist" in _denial(denied.value)
            validating = await api.request(
                "GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/"
                f"{WEBHOOK_CONFIGURATION}")
            assert {h["clientConfig"]["url"] for h in validating["webhooks"]} == {
                f"https://127.0.0.1:{port}/validate-jobs",
                f"https://127.0.0.1:{port}/validate-admitter"}
    finally:
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            local_cluster.kubectl("delete", kind, WEBHOOK_CONFIGURATION, "--ignore-not-found")
