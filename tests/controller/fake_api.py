"""An in-memory stand-in for the API server, enough for the Reconciler's writes (create and
merge patch), counting every write; and builders for the objects the controller reads."""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.settings import Settings
from admitter.controller.reconciler import Reconciler
from admitter.core.model import GPU
from admitter.kube import client as kube
from admitter.kube.client import JSON_PATCH, MERGE_PATCH, Kind
from admitter.kube.informer import Informer
from admitter.kube.objects import Obj, format_time

from builders.kube import JobWrapper, cluster_queue, local_queue

Write = tuple[str, str, Obj]
"""(verb, resource path, body)."""
CLOCK = 1_800_000_000.0
"""The controller's clock in these tests; objects were created a minute before."""
CREATED = format_time(CLOCK - 60)


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


class FakeApi:
    def __init__(self) -> None:
        self.objects: dict[str, Obj] = {}
        self.writes: list[Write] = []
        self._versions = itertools.count(100)

    def _stamp(self, obj: Obj) -> Obj:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        return copy.deepcopy(obj)

    async def create(self, kind: Kind, obj: Obj) -> Obj:
        meta = obj["metadata"]
        path = kind.path(meta.get("namespace"))
        self.writes.append(("POST", path, obj))
        stored = copy.deepcopy(obj)
        number = next(self._versions)
        stored["metadata"].setdefault("name", f"{meta.get('generateName', 'x')}{number}")
        stored["metadata"]["uid"] = f"uid-{number}"
        stored["metadata"].setdefault("creationTimestamp", CREATED)
        self.objects[f"{path}/{stored['metadata']['name']}"] = stored
        return self._stamp(stored)

    async def patch(self, kind: Kind, name: str, patch: Any, namespace: str | None = None,
                    subresource: str | None = None, content_type: str = MERGE_PATCH) -> Obj:
        self.writes.append(("PATCH", kind.path(namespace, name, subresource), patch))
        path = kind.path(namespace, name)
        if path not in self.objects:
            raise ApiException(status=404, reason=f"{path} not found")
        if content_type == JSON_PATCH:
            self.objects[path] = json_patch(self.objects[path], patch)
            return self._stamp(self.objects[path])
        assert content_type == MERGE_PATCH, content_type
        expected = (patch.get("metadata") or {}).get("resourceVersion")
        if expected is not None and expected != self.objects[path]["metadata"]["resourceVersion"]:
            raise ApiException(status=409, reason="the object has been modified")
        self.objects[path] = merge(self.objects[path], patch)
        return self._stamp(self.objects[path])

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj:
        path = kind.path(namespace, name)
        self.writes.append(("GET", path, None))
        if path not in self.objects:
            raise ApiException(status=404, reason=f"{path} not found")
        return copy.deepcopy(self.objects[path])

    async def delete(self, kind: Kind, name: str, namespace: str | None = None,
                     options: Obj | None = None) -> Obj:
        path = kind.path(namespace, name)
        self.writes.append(("DELETE", path, options or {}))
        stored = self.objects[path]["metadata"]
        for field, expected in ((options or {}).get("preconditions") or {}).items():
            if stored.get(field) != expected:
                raise ApiException(status=409, reason=f"precondition {field} failed")
        return self.objects.pop(path)

    async def list(self, kind: Kind, query: dict[str, str] | None = None) -> Obj:
        """Every object of `kind` held, as a fresh read returns them."""
        items = [copy.deepcopy(obj) for path, obj in self.objects.items()
                 if path.rsplit("/", 2)[1] == kind.plural]
        return {"kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}

    def put(self, kind: Kind, obj: Obj) -> Obj:
        """An object created by someone else (a user, a Job's owner), as the cache sees it."""
        meta = obj["metadata"]
        meta.setdefault("uid", f"uid-{meta['name']}")
        meta.setdefault("creationTimestamp", CREATED)
        self.objects[kind.path(meta.get("namespace"), meta["name"])] = obj
        return self._stamp(obj)

    def count(self, verb: str, resource: str) -> int:
        """Writes of one verb to one resource (e.g. "PATCH", "workloads/status")."""
        return sum(1 for v, path, _ in self.writes if v == verb and _resource(v, path) == resource)

    def events(self) -> list[Obj]:
        return [body for verb, path, body in self.writes
                if verb == "POST" and path.endswith("/events")]


class SlowApi(FakeApi):
    """Writes wait for `open` to be set, as on an API server busy starting pods; `most`
    is the largest number of writes that were waiting at once."""

    def __init__(self) -> None:
        super().__init__()
        self.open = asyncio.Event()
        self.waiting = self.most = 0

    async def patch(self, *args: Any, **kwargs: Any) -> Obj:
        self.waiting += 1
        self.most = max(self.most, self.waiting)
        await self.open.wait()
        self.waiting -= 1
        return await super().patch(*args, **kwargs)


def _resource(verb: str, path: str) -> str:
    parts = path.split("/")
    if parts[-1] == "status":
        return f"{parts[-3]}/status"
    return parts[-1] if verb == "POST" else parts[-2]


def json_patch(target: Obj, ops: list[Obj]) -> Obj:
    """RFC 6902 add and remove of object members (what the controller sends)."""
    out = copy.deepcopy(target)
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~")
                          for p in op["path"].split("/")[1:]]
        node = out
        for part in parents:
            node = node[part]
        if op["op"] == "remove":
            if last not in node:
                raise ApiException(status=422, reason=f"{op['path']} does not exist")
            del node[last]
        else:
            assert op["op"] in ("add", "replace"), op
            node[last] = copy.deepcopy(op["value"])
    return out


def add(api: FakeApi, informer: Informer, kind: Kind, obj: Obj) -> Obj:
    """Create an object behind the controller's back and let its cache see it."""
    stored = api.put(kind, obj)
    informer.observe(stored)
    informer.on_change("ADDED", stored)
    return stored


class ListingApi(FakeApi):
    """Answers a relist with what the test says the store holds now."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: dict[str, list[Obj]] = {}

    async def list(self, kind: Kind, query: dict[str, str] | None = None) -> Obj:
        return {"kind": "List", "metadata": {"resourceVersion": "1"},
                "items": self.listed.get(kind.plural, [])}


class WatchReplay:
    """Feeds informers what their watch or a relist would bring, newer versions each time:
    for property tests of the indexes kept beside the stores."""

    def __init__(self, api: ListingApi) -> None:
        self.api = api
        self._versions = itertools.count(1000)

    def stamped(self, obj: Obj) -> Obj:
        return {**obj, "metadata": {**obj["metadata"],
                                    "resourceVersion": str(next(self._versions))}}

    def put(self, informer: Informer, obj: Obj) -> None:
        informer.observe(self.stamped(obj))

    def delete(self, informer: Informer, name: str) -> None:
        current = informer.get("ns", name)
        if current is not None:
            informer._apply({"type": "DELETED", "object": self.stamped(current)})

    def relist(self, informer: Informer, keep: int) -> None:
        """The store listed again holding the objects whose position is a bit set in `keep`."""
        kept = [obj for i, obj in enumerate(informer.items()) if keep >> i & 1]
        self.api.listed[informer.kind.plural] = kept
        asyncio.run(informer._list())


def team(api: FakeApi, controller: Reconciler, quota: int, **node_gpus: int) -> None:
    """Nodes (name=GPUs), ClusterQueue `team` with `quota` GPUs, LocalQueue `default` in
    namespace `ns`."""
    caches = controller.caches
    for name, gpus in node_gpus.items():
        add(api, caches.nodes, kube.NODES, node(name.replace("_", "-"), gpus))
    add(api, caches.cluster_queues, kube.CLUSTER_QUEUES, cluster_queue("team", quota, limit=quota))
    add(api, caches.local_queues, kube.LOCAL_QUEUES, local_queue("team", namespace="ns"))


async def submitted_jobs(api: FakeApi, controller: Reconciler, count: int, gpus: int,
                         **node_gpus: int) -> None:
    """`team` on 8 GPUs of quota and the given nodes, `count` unfunded Jobs j0, j1, ... of
    `gpus` GPUs each, and two passes: the Jobs that fit are admitted."""
    team(api, controller, 8, **node_gpus)
    for i in range(count):
        add(api, controller.caches.jobs["Job"], kube.JOBS,
            JobWrapper(f"j{i}", "ns").gpus(gpus).min_runtime(None).obj())
    for _ in range(2):
        await settled_pass(controller)


def reconciler(api: FakeApi, clock: Callable[[], float] = lambda: CLOCK) -> Reconciler:
    return Reconciler(api, Settings(), "test", clock)  # type: ignore[arg-type]


async def settled_pass(controller: Reconciler) -> None:
    """One pass, then the writes it started in the background."""
    await controller.reconcile()
    await controller.admitting.drain()
    while True:
        running = [t for t in (controller.creations, controller.reports,
                               *controller.events.sending) if t is not None and not t.done()]
        if not running:
            return
        await asyncio.gather(*running)


def node(name: str, gpus: int) -> Obj:
    return {"metadata": {"name": name, "labels": {}},
            "status": {"allocatable": {GPU: str(gpus), "cpu": "64"}}}


def workload(namespace: str, name: str, gpus: int, owner: Obj | None = None) -> Obj:
    """A Workload created directly, or for `owner` (a Job) as the controller would."""
    meta: Obj = {"name": name, "namespace": namespace}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job",
                                    "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], "controller": True}]
    return {"apiVersion": "admitter.dev/v1alpha1", "kind": "Workload", "metadata": meta,
            "spec": {"queueName": "default", "minRuntime": "1h",
                     "podSets": [{"name": "main", "count": 1, "requests": {GPU: str(gpus)}}]}}
