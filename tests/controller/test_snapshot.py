"""The snapshot a pass decides on counts admitted pods where kube-scheduler can put them."""

from __future__ import annotations

from fake_api import FakeApi, SlowApi, add, reconciler, settled_pass, team

from admitter.controller.reconciler import Reconciler
from admitter.controller.snapshot import Translations, build_view, core_queues
from admitter.core.model import GPU
from admitter.jobs.workloads import workload_name
from admitter.kube import client as kube
from admitter.kube.objects import Obj

from builders.kube import JobWrapper, cluster_queue


def pod(job_name: str, node_name: str, gpus: int) -> Obj:
    container = {"name": "main", "resources": {"requests": {GPU: str(gpus)}}}
    return {"metadata": {"name": f"{job_name}-pod", "namespace": "ns",
                         "ownerReferences": [{"kind": "Job", "name": job_name}]},
            "spec": {"nodeName": node_name, "containers": [container]},
            "status": {"phase": "Running"}}


def admitted(api: FakeApi) -> dict[str, str]:
    """Admitted Workloads → the node their one pod was hinted to."""
    hints = {}
    for path, wl in api.objects.items():
        if path.startswith(kube.WORKLOADS.path("ns", "")) and (wl.get("status") or {}).get(
                "admission"):
            [hint] = wl["status"]["admission"]["nodeHints"]
            hints[wl["metadata"]["ownerReferences"][0]["name"]] = hint["node"]
    return hints


async def four_jobs_on_two_nodes() -> tuple[FakeApi, Reconciler, dict[str, str]]:
    """Two 4-GPU nodes filled by four admitted 2-GPU Jobs; returns the Job → hinted node."""
    api = FakeApi()
    controller = reconciler(api)
    team(api, controller, 16, node_a=4, node_b=4)
    await fill(api, controller, ["j1", "j2", "j3", "j4"])
    return api, controller, admitted(api)


async def fill(api: FakeApi, controller: Reconciler, names: list[str]) -> None:
    for name in names:
        add(api, controller.caches.jobs["Job"], kube.JOBS,
            JobWrapper(name, "ns").gpus(2).min_runtime(None).obj())
    for _ in range(3):  # Workloads are created in the background, then admitted
        await settled_pass(controller)


async def test_pods_bound_away_from_their_hints_leave_no_phantom_room() -> None:
    """Two 4-GPU nodes filled by four 2-GPU Jobs. kube-scheduler spreads where the cycle
    packed: one pod hinted to node A is bound on node B next to one hinted there, while the
    other two are not bound yet. Counting each unbound pod at its hint puts six GPUs on B,
    which shows zero free, and leaves two free on A: a fifth Job would be admitted onto GPUs
    that do not exist (the restart-burst over-admission)."""
    api, controller, hints = await four_jobs_on_two_nodes()
    caches = controller.caches
    assert len(hints) == 4 and sorted(hints.values()) == ["node-a"] * 2 + ["node-b"] * 2
    on_a = sorted(name for name, hinted in hints.items() if hinted == "node-a")
    on_b = sorted(name for name, hinted in hints.items() if hinted == "node-b")
    add(api, caches.pods, kube.PODS, pod(on_a[0], "node-b", 2))
    add(api, caches.pods, kube.PODS, pod(on_b[0], "node-b", 2))
    await fill(api, controller, ["j5"])
    assert sorted(admitted(api)) == ["j1", "j2", "j3", "j4"]
    translations = Translations()
    first = build_view(caches, controller.settings, 0.0, translations).snapshot.workloads
    again = build_view(caches, controller.settings, 1.0, translations).snapshot.workloads
    jobs = caches.jobs["Job"]
    moved = [w for w in first if w.key == f"ns/{workload_name(jobs.get('ns', on_a[0]))}"]
    assert moved and moved[0].placement == {"node-b": 1}
    assert all(a is b for a, b in zip(first, again, strict=True)), "nothing translated twice"


async def test_a_pass_counts_the_admissions_still_being_written() -> None:
    """Passes do not wait for admission writes; the next one must still count them, or it
    would give their room away (and converge must not start their Jobs a second time)."""
    api = SlowApi()
    controller = reconciler(api)
    caches = controller.caches
    team(api, controller, 16, node_a=4)
    for name in ("j1", "j2", "j3"):
        add(api, caches.jobs["Job"], kube.JOBS,
            JobWrapper(name, "ns").gpus(2).min_runtime(None).obj())
    await controller.reconcile()  # creates the Workloads in the background
    assert controller.creations is not None
    await controller.creations
    first = await controller.reconcile()
    assert len(first.admissions) == 2, "4 GPUs hold two of the three"
    again = await controller.reconcile()
    assert not again.admissions, "the two being written still hold the node"
    assert [p.key for p in again.pending] == [p.key for p in first.pending]
    api.open.set()
    await controller.admitting.drain()
    assert api.count("PATCH", "workloads/status") == 2
    assert api.count("PATCH", "jobs") == 2, "each admitted Job started once"
    await settled_pass(controller)
    assert api.count("PATCH", "jobs") == 2 and len(admitted(api)) == 2


async def test_a_pod_bound_between_passes_moves_its_workload_in_the_next_view() -> None:
    """What a pass derives from a Workload is kept between passes; a pod bound since (its
    Job's pods changed, not the Workload) must still be seen where it runs."""
    api, controller, hints = await four_jobs_on_two_nodes()
    caches = controller.caches
    on_a = sorted(name for name, hinted in hints.items() if hinted == "node-a")
    key = f"ns/{workload_name(caches.jobs['Job'].get('ns', on_a[0]))}"
    translations = Translations()
    before = build_view(caches, controller.settings, 0.0, translations).snapshot
    assert [w.placement for w in before.workloads if w.key == key] == [{"node-a": 1}]
    add(api, caches.pods, kube.PODS, pod(on_a[0], "node-b", 2))
    after = build_view(caches, controller.settings, 1.0, translations).snapshot
    assert [w.placement for w in after.workloads if w.key == key] == [{"node-b": 1}]
    assert all(a is b for a, b in zip(before.nodes, after.nodes, strict=True)), \
        "an admitter pod changes no node's foreign usage: nodes are not translated again"


async def test_queues_in_a_parent_cycle_or_under_a_missing_parent_are_left_out_not_fatal(
        caplog) -> None:
    """Two concurrent re-parentings can each pass the webhook (each saw the other's old
    parent) and close a cycle; a parent can be deleted past the webhook. Passes go on: the
    broken queues are left out and named, the rest of the tree keeps admitting."""
    api = FakeApi()
    controller = reconciler(api)
    team(api, controller, 8, node_a=8)
    for name, parent in (("a", "b"), ("b", "a"), ("under-a", "a"), ("lost", "deleted")):
        queue = cluster_queue(name, 8, limit=8)
        queue["spec"]["parent"] = parent
        add(api, controller.caches.cluster_queues, kube.CLUSTER_QUEUES, queue)
    by_name = {cq["metadata"]["name"]: cq for cq in controller.caches.cluster_queues.items()}
    assert [queue.name for queue in core_queues(by_name)] == ["team"]
    await fill(api, controller, ["j1"])
    assert admitted(api) == {"j1": "node-a"}
    for name in ("a", "b", "under-a", "lost"):
        assert f"ClusterQueue {name} ignored: it is in a parent cycle or below a missing" in (
            caplog.text)
