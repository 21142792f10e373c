"""The controller with DeviceClasses mapped: nodes offer the GPUs their ResourceSlices publish,
less those claims of pods admitter does not manage hold; a Job claiming GPUs through a
template is charged for them and admitted onto the nodes that have them."""

from __future__ import annotations

from fake_api import FakeApi, add, settled_pass, team

from admitter.api.settings import DeviceClassMapping, Settings
from admitter.controller.cache import Devices
from admitter.controller.reconciler import Reconciler
from admitter.controller.snapshot import Translations, build_view
from admitter.core.model import GPU
from admitter.kube import client as kube
from admitter.kube.objects import Obj
from admitter.testing.dra_driver import (
    DEVICE_CLASS,
    DRIVER,
    claim_template,
    claiming,
    device_class,
    resource_slice,
)

from builders.kube import JobWrapper

SETTINGS = Settings(device_class_mappings=[
    DeviceClassMapping(name=GPU, device_class_names=[DEVICE_CLASS])])


def dra_controller(api: FakeApi) -> tuple[Reconciler, Devices]:
    """`team` (16 GPUs) on two nodes without device-plugin GPUs, 8 DRA GPUs each; and the
    controller's DRA informers."""
    controller = Reconciler(api, SETTINGS, "test", lambda: 1.0e9)  # type: ignore[arg-type]
    team(api, controller, 16, dra_a=0, dra_b=0)
    devices = controller.caches.devices
    assert devices is not None
    add(api, devices.classes, kube.DEVICE_CLASSES, device_class())
    for name in ("dra-a", "dra-b"):
        node = {"metadata": {"name": name, "uid": f"uid-{name}"}}
        add(api, devices.slices, kube.RESOURCE_SLICES, resource_slice(node, 8))
    return controller, devices


def allocated_claim(name: str, node: str, devices: int, pod: Obj) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns",
                         "ownerReferences": [{"kind": "Pod", "name": pod["metadata"]["name"],
                                              "uid": "uid-p"}]},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpus", "driver": DRIVER, "pool": node, "device": f"gpu-{i}"}
                for i in range(devices)]}},
                "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"],
                                 "uid": "uid-p"}]}}


def pod_of(owner: Obj | None, name: str = "p") -> Obj:
    meta: Obj = {"name": name, "namespace": "ns"}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Job", "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"]}]
    return {"metadata": meta, "spec": {"nodeName": "dra-a", "containers": []},
            "status": {"phase": "Running"}}


def gpus_offered(controller: Reconciler) -> dict[str, int]:
    view = build_view(controller.caches, controller.settings, 1.0e9, Translations())
    return {node.name: node.allocatable.get(GPU, 0) - node.used.get(GPU, 0)
            for node in view.snapshot.nodes}


def test_nodes_offer_the_gpus_their_slices_publish() -> None:
    assert gpus_offered(dra_controller(FakeApi())[0]) == {"dra-a": 8, "dra-b": 8}


def test_a_slice_published_or_withdrawn_changes_what_the_node_offers_at_once() -> None:
    api = FakeApi()
    controller, devices = dra_controller(api)
    assert gpus_offered(controller)["dra-a"] == 8
    node = {"metadata": {"name": "dra-a", "uid": "uid-dra-a"}}
    add(api, devices.slices, kube.RESOURCE_SLICES, resource_slice(node, 4, generation=2))
    assert gpus_offered(controller)["dra-a"] == 4, "the pool's newer generation replaces it"
    devices.classes.forget(devices.classes.items()[0])
    assert gpus_offered(controller) == {"dra-a": 0, "dra-b": 0}


def test_devices_claims_of_pods_admitter_does_not_manage_hold_are_not_offered() -> None:
    api = FakeApi()
    controller, devices = dra_controller(api)
    notebook = pod_of(None, "notebook")
    add(api, controller.caches.pods, kube.PODS, notebook)
    add(api, devices.claims, kube.RESOURCE_CLAIMS, allocated_claim("nb-gpus", "dra-a", 3, notebook))
    assert gpus_offered(controller) == {"dra-a": 5, "dra-b": 8}


def test_a_queued_jobs_claims_are_counted_by_its_admission_not_again() -> None:
    api = FakeApi()
    controller, devices = dra_controller(api)
    job = add(api, controller.caches.jobs["Job"], kube.JOBS,
              JobWrapper("train", "ns").gpus(0).obj())
    pod = pod_of(job)
    add(api, controller.caches.pods, kube.PODS, pod)
    add(api, devices.claims, kube.RESOURCE_CLAIMS, allocated_claim("train-gpus", "dra-a", 8, pod))
    assert controller.caches.node_devices()[1] == {}


async def test_a_job_claiming_gpus_is_charged_and_admitted_onto_the_nodes_that_have_them(
        ) -> None:
    api = FakeApi()
    controller, devices = dra_controller(api)
    add(api, devices.claim_templates, kube.RESOURCE_CLAIM_TEMPLATES,
        claim_template("ns", "eight", 8))
    job = JobWrapper("train", "ns").pods(2).gpus(0).min_runtime(None).obj()
    job["spec"]["template"]["spec"] = claiming(job["spec"]["template"]["spec"], "eight")
    add(api, controller.caches.jobs["Job"], kube.JOBS, job)
    for _ in range(2):
        await settled_pass(controller)
    (wl,) = controller.caches.workloads.items()
    assert wl["spec"]["podSets"][0]["requests"] == {GPU: 8}, "8 GPUs a pod, through its claim"
    hints = {hint["node"]: hint["count"] for hint in wl["status"]["admission"]["nodeHints"]}
    assert hints == {"dra-a": 1, "dra-b": 1}



