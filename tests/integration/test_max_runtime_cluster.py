"""A maximum run time on the real control plane: the Job is stopped when it has run that long,
its Workload finished with the reason, never requeued, and its GPUs go to the next Job."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from admitter_world import apply_all, in_process_controller, jobs, running, workloads

from admitter.api.workload import CONDITION_FINISHED
from admitter.core.decisions import EvictionReason
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration


def _finished(wl: Obj) -> Obj | None:
    return next((c for c in (wl.get("status") or {}).get("conditions", [])
                 if c["type"] == CONDITION_FINISHED and c["status"] == "True"), None)


async def test_a_job_is_stopped_at_its_maximum_run_time_and_its_gpus_go_to_the_next(
        api: Kube, namespace: str, kubeconfig: Path) -> None:
    # One node's worth of quota: the second Job can start only once the first has stopped.
    await apply_all(api, *leaf_queue(f"maxrun-{namespace}", 8, limit=8, namespace=namespace))
    notebook = (JobWrapper("notebook", namespace).min_runtime("2s").max_runtime("15s")
                .runtime("1h").obj())
    train = JobWrapper("train", namespace).min_runtime("2s").runtime("1h").obj()
    async with in_process_controller(kubeconfig):
        await apply_all(api, notebook)
        await eventually(lambda: _running(api, namespace, "notebook"), "the notebook to run", 60)
        await apply_all(api, train)
        await eventually(lambda: _running(api, namespace, "train"),
                         "the next Job to start once the notebook ran 15s", 90)
        listed = {w["metadata"]["name"]: w for w in await workloads(api, namespace)}
        stopped = next(w for w in listed.values()
                       if w["metadata"]["ownerReferences"][0]["name"] == "notebook")
        finished = _finished(stopped)
        assert finished is not None, stopped.get("status")
        assert finished["reason"] == EvictionReason.MAX_RUNTIME_EXCEEDED.value
        assert finished["message"] == "ran 15s, its maximum run time"
        assert not (stopped.get("status") or {}).get("admission")
        assert stopped["spec"]["maxRuntime"] == "15s"
        # Stopped for good: suspended, and not admitted again, although the queue has room
        # for it once train is deleted.
        await api.delete(kube.JOBS, "train", namespace)
        for _ in range(5):
            current = await jobs(api, namespace)
            assert current["notebook"]["spec"]["suspend"] is True
            assert not running(current["notebook"])
            await asyncio.sleep(1.0)


async def _running(api: Kube, namespace: str, name: str) -> bool:
    return running((await jobs(api, namespace))[name])
