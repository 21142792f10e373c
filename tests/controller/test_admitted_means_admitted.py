"""Admitted means admitted: a Job changed after admission is evicted and charged anew, an
evicted Job keeps no mark that would let its owner unsuspend it, a Workload left behind by
its Job is finished, and a Job that ran before can be admitted into another domain."""

from __future__ import annotations

import copy
from typing import Any

from fake_api import FakeApi, add, reconciler, settled_pass, team, workload
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION, ORIGINAL_AFFINITY_ANNOTATION
from admitter.api.workload import CONDITION_EVICTED, CONDITION_FINISHED, Reason
from admitter.controller.converge import Step, converge_step
from admitter.controller.reconciler import Reconciler
from admitter.core.decisions import EvictionReason
from admitter.jobs.workloads import JOB_NAME_LABEL, workload_name
from admitter.kube import client as kube
from admitter.kube.client import MERGE_PATCH, Kind
from admitter.kube.objects import Obj, is_true

from builders.kube import JobWrapper


def stored_job(api: FakeApi, name: str) -> Obj:
    return api.objects[kube.JOBS.path("ns", name)]


def stored_workload(api: FakeApi, controller: Reconciler, name: str) -> Obj | None:
    found = controller.caches.jobs["Job"].get("ns", name)
    assert found is not None
    return api.objects.get(kube.WORKLOADS.path("ns", workload_name(found)))


def changed(api: FakeApi, controller: Reconciler, name: str, **spec: Any) -> None:
    """The Job's owner (or the job controller) edits it, as the informer then sees it."""
    edited = copy.deepcopy(stored_job(api, name))
    edited["spec"].update(spec.pop("spec", {}))
    edited.setdefault("status", {}).update(spec.pop("status", {}))
    add(api, controller.caches.jobs["Job"], kube.JOBS, edited)


async def admitted_job(api: FakeApi, controller: Reconciler, name: str, gpus: int = 1) -> Obj:
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper(name, "ns").gpus(gpus).min_runtime(None).obj())
    for _ in range(2):
        await settled_pass(controller)
    wl = stored_workload(api, controller, name)
    assert wl is not None and wl["status"]["admission"], "admitted"
    assert not stored_job(api, name)["spec"]["suspend"]
    return wl


async def widened_after_admission(api: FakeApi) -> tuple[Reconciler, Obj]:
    """`train` admitted for one pod, then its parallelism raised to 5, and one pass run."""
    controller = reconciler(api)
    team(api, controller, 8, node_a=8)
    first = await admitted_job(api, controller, "train")
    changed(api, controller, "train", spec={"parallelism": 5, "completions": 5})
    await settled_pass(controller)
    return controller, first


async def test_raising_parallelism_after_admission_evicts_and_charges_the_job_anew() -> None:
    api = FakeApi()
    controller, first = await widened_after_admission(api)
    path = kube.WORKLOADS.path("ns", first["metadata"]["name"])
    writes = [(verb, at, body) for verb, at, body in api.writes if verb == "PATCH"]
    marked = next(i for i, (_, at, body) in enumerate(writes)
                  if at == f"{path}/status" and body["status"].get("evictionCount"))
    suspended = next(i for i, (_, at, body) in enumerate(writes) if i > marked
                     and at == kube.JOBS.path("ns", "train") and body["spec"].get("suspend"))
    released = next(i for i, (_, at, body) in enumerate(writes) if i > suspended
                    and at == f"{path}/status" and "admission" in body["status"])
    assert writes[released][2]["status"]["admission"] is None, "5 pods must not run on 1 charged"
    assert "admission" not in writes[marked][2]["status"], "held until the Job is suspended"
    assert ("DELETE", path) in [(verb, at) for verb, at, _ in api.writes], "then replaced"
    assert stored_job(api, "train")["spec"]["suspend"]
    assert any(e["reason"] == Reason.JOB_CHANGED for e in api.events())
    for _ in range(3):  # the stale Workload goes, a matching one is made and admitted
        await settled_pass(controller)
    renewed = stored_workload(api, controller, "train")
    assert renewed is not None and renewed["metadata"]["uid"] != first["metadata"]["uid"]
    assert renewed["spec"]["podSets"][0]["count"] == 5
    assert renewed["status"]["admission"], "admitted again, charged for its 5 pods"


async def evicted_after_running(api: FakeApi) -> tuple[Reconciler, Obj, Obj]:
    """A Job admitted, started (so it has a startTime) and evicted; the controller, the
    Workload and the Job as the eviction left them."""
    controller = reconciler(api)
    team(api, controller, 8, node_a=8)
    wl = await admitted_job(api, controller, "train")
    changed(api, controller, "train", status={"startTime": "2027-01-15T08:00:00Z"})
    running = controller.caches.jobs["Job"].get("ns", "train")
    assert running is not None
    updated, suspended = await controller.actions.evict(wl, running, EvictionReason.PREEMPTED.value,
                                                        "test", 0.0)
    assert suspended is not None
    return controller, updated, suspended


async def test_an_evicted_job_loses_its_admitted_mark_and_start_time() -> None:
    """The Job webhook lets an owner unsuspend a Job that carries the admitted mark, and
    Kubernetes keeps status.startTime on a suspended Job; an evicted Job keeps neither."""
    api = FakeApi()
    controller, updated, suspended = await evicted_after_running(api)
    assert ADMITTED_WORKLOAD_ANNOTATION not in suspended["metadata"]["annotations"]
    controller.caches.workloads.observe(updated)
    controller.caches.jobs["Job"].observe(suspended)
    controller.touched.add(("Job", "ns", "train"))
    await controller.converge_jobs(0.0, controller.jobs_to_check(0.0))
    job_now = stored_job(api, "train")
    assert not job_now["status"].get("startTime"), "cleared through jobs/status"
    assert api.count("PATCH", "jobs/status") == 1
    await controller.converge_jobs(
        0.0, {("Job", "ns", "train"): controller.caches.jobs["Job"].get("ns", "train")})
    annotations = stored_job(api, "train")["metadata"].get("annotations") or {}
    assert ORIGINAL_AFFINITY_ANNOTATION not in annotations, "its own template is back"
    assert "affinity" not in stored_job(api, "train")["spec"]["template"]["spec"]


async def test_workloads_left_behind_by_their_job_are_finished() -> None:
    api = FakeApi()
    controller = reconciler(api)
    team(api, controller, 8, node_a=8)
    caches = controller.caches
    labelled = workload("ns", "orphaned-by-cascade", 8)  # the GC dropped its owner reference
    labelled["metadata"]["labels"] = {JOB_NAME_LABEL: "gone"}
    gone = {"metadata": {"name": "deleted", "uid": "uid-deleted"}}
    # in the API, not yet cached:
    lagging_job = api.put(kube.JOBS, JobWrapper("lagging", "ns").gpus(1).min_runtime(None).obj())
    for wl, owner in ((labelled, None), (workload("ns", "owner-gone", 8, gone), None),
                      (workload("ns", "cache-lags", 1, lagging_job), None)):
        add(api, caches.workloads, kube.WORKLOADS, wl if owner is None else owner)
    await settled_pass(controller)
    finished = {name for name in ("orphaned-by-cascade", "owner-gone", "cache-lags")
                if is_true(api.objects[kube.WORKLOADS.path("ns", name)], CONDITION_FINISHED)}
    assert finished == {"orphaned-by-cascade", "owner-gone"}


class TemplateImmutableOnceStarted(FakeApi):
    """Kubernetes' rule: a Job's pod template may change only while it is suspended and has
    no status.startTime; and one Job's writes fail, as a webhook denying them would."""

    def __init__(self, failing: str | None = None) -> None:
        super().__init__()
        self.failing = failing

    async def patch(self, kind: Kind, name: str, patch: Any, namespace: str | None = None,
                    subresource: str | None = None, content_type: str = MERGE_PATCH) -> Obj:
        if kind == kube.JOBS and name == self.failing:
            raise ApiException(status=403, reason="denied by a webhook")
        current = self.objects.get(kind.path(namespace, name), {})
        touches_template = (content_type == MERGE_PATCH and subresource is None
                            and "template" in (patch.get("spec") or {}))
        if (kind == kube.JOBS and touches_template
                and (current.get("status") or {}).get("startTime")):
            raise ApiException(status=422, reason="spec.template: field is immutable")
        return await super().patch(kind, name, patch, namespace, subresource, content_type)


async def test_a_job_that_ran_before_is_admitted_again_into_another_domain() -> None:
    api = TemplateImmutableOnceStarted()
    controller, updated, _ = await evicted_after_running(api)
    # Still suspended with its startTime when admitted again (the Job controller had not
    # caught up): the template patch must still land.
    rack_b = {**updated, "status": {**updated["status"], "admission": {
        "clusterQueue": "team", "topologyDomain": {"rack": "b"}, "nodeHints": []}}}
    suspended = api.objects[kube.JOBS.path("ns", "train")]
    suspended["status"]["startTime"] = "2027-01-15T08:00:00Z"
    started = await controller.actions.start_job(copy.deepcopy(suspended), rack_b)
    assert not started["spec"]["suspend"]
    terms = started["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "rack", "operator": "In",
                                             "values": ["b"]}]}]


async def test_one_job_whose_writes_fail_never_aborts_a_pass() -> None:
    api = TemplateImmutableOnceStarted()
    controller = reconciler(api)
    team(api, controller, 8, node_a=8)
    await admitted_job(api, controller, "broken")
    changed(api, controller, "broken", spec={"suspend": True})  # admitted, to be started
    api.failing = "broken"
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("fine", "ns").gpus(1).min_runtime(None).obj())
    for _ in range(2):
        await settled_pass(controller)  # raises if the failing write aborts the pass
    assert not stored_job(api, "fine")["spec"]["suspend"], "the other Job runs"
    assert stored_job(api, "broken")["spec"]["suspend"]
    failed = controller.metrics.registry.get_sample_value("admitter_failed_writes_total",
                                                          {"step": "start"})
    assert failed is not None and failed >= 1


class SuspendFailsOnce(FakeApi):
    """The API server goes away after an eviction's first write: the Job's suspension fails
    once."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def patch(self, kind: Kind, name: str, patch: Any, namespace: str | None = None,
                    subresource: str | None = None, content_type: str = MERGE_PATCH) -> Obj:
        suspends = isinstance(patch, dict) and (patch.get("spec") or {}).get("suspend")
        if kind == kube.JOBS and suspends and not self.failed:
            self.failed = True
            raise ApiException(status=503, reason="the API server is going away")
        return await super().patch(kind, name, patch, namespace, subresource, content_type)


async def test_an_interrupted_eviction_keeps_the_admission_until_the_job_is_suspended() -> None:
    api = SuspendFailsOnce()
    controller, first = await widened_after_admission(api)
    assert api.failed
    marked = api.objects[kube.WORKLOADS.path("ns", first["metadata"]["name"])]
    assert not stored_job(api, "train")["spec"]["suspend"], "still running..."
    assert marked["status"]["admission"], "...and still admitted"
    assert is_true(marked, CONDITION_EVICTED) and marked["status"]["evictionCount"] == 1
    assert converge_step(stored_job(api, "train"), marked) is Step.EVICT_CHANGED
    add(api, controller.caches.workloads, kube.WORKLOADS, marked)  # as the watch delivers it
    controller.touched.add(("Job", "ns", "train"))  # its event has the Job checked
    await settled_pass(controller)  # carried on: suspended, released, replaced
    assert stored_job(api, "train")["spec"]["suspend"]
    released = [body for verb, at, body in api.writes if verb == "PATCH"
                and at.startswith(kube.WORKLOADS.path("ns", first["metadata"]["name"]))
                and "admission" in body["status"] and body["status"]["admission"] is None]
    assert len(released) == 1
    assert not any(body["status"].get("evictionCount") == 2 for _, _, body in api.writes
                   if isinstance(body, dict) and isinstance(body.get("status"), dict)), \
        "counted once"


async def test_an_evicting_workload_has_its_job_suspended_then_its_admission_released() -> None:
    api = FakeApi()
    controller = reconciler(api)
    team(api, controller, 8, node_a=8)
    wl = await admitted_job(api, controller, "train")
    evicting = {**wl, "status": {**wl["status"], "conditions": [
        *wl["status"]["conditions"], {"type": CONDITION_EVICTED, "status": "True",
                                      "reason": "Preempted", "message": "for urgent"}]}}
    running = stored_job(api, "train")
    assert converge_step(running, evicting) is Step.SUSPEND
    assert converge_step({**running, "spec": {**running["spec"], "suspend": True}},
                         evicting) is Step.RELEASE
    assert converge_step(running, wl) is Step.NONE
