"""The controller's caches keep of a job what admission reads (`JobProjection`) and share the
parts many jobs and Workloads repeat; the job admitted is the whole one the API server has."""

from __future__ import annotations

from fake_api import FakeApi, add, reconciler, settled_pass, team

from admitter.kube import client as kube

from builders.kube import JobWrapper


async def test_a_cached_job_keeps_what_admission_reads_and_the_whole_job_is_started() -> None:
    api = FakeApi()
    controller = reconciler(api)
    team(api, controller, 16, n1=8, n2=8)
    jobs = controller.caches.jobs["Job"]
    for name in ("a", "b"):
        add(api, jobs, kube.JOBS, JobWrapper(name, "ns").gpus(8).obj())
    cached = [jobs.get("ns", name) for name in ("a", "b")]
    assert cached[0] is not None and cached[1] is not None
    pod_spec = cached[0]["spec"]["template"]["spec"]
    assert pod_spec == {"containers": [{"name": "main",
                                        "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}
    assert cached[1]["spec"]["template"]["spec"] is pod_spec
    for _ in range(2):
        await settled_pass(controller)
    for name in ("a", "b"):
        started = api.objects[kube.JOBS.path("ns", name)]
        assert started["spec"]["suspend"] is False
        assert started["spec"]["template"]["spec"]["containers"][0]["image"] == (
            "registry.invalid/train")
    first, second = controller.caches.workloads.items()
    assert first["spec"] is second["spec"]  # one Workload spec for jobs of one shape
