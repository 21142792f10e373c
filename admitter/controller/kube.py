"""A thin JSON client over kubernetes_asyncio's ApiClient.

The controller works on plain dicts (the API's own JSON) rather than generated model classes:
one code path for core kinds and admitter's CRDs, no (de)serialisation cost on every watch
event, and patches that say exactly which fields they touch.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.base import GROUP, VERSION

Obj = dict[str, Any]
WRITE_CONCURRENCY = 16
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True, slots=True)
class Kind:
    """Where a kind lives in the REST API."""

    group_version: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
        if subresource is not None:
            base += f"/{subresource}"
        return base


NODES = Kind("v1", "nodes", False)
PODS = Kind("v1", "pods", True)
EVENTS = Kind("v1", "events", True)
JOBS = Kind("batch/v1", "jobs", True)
PRIORITY_CLASSES = Kind("scheduling.k8s.io/v1", "priorityclasses", False)
LEASES = Kind("coordination.k8s.io/v1", "leases", True)
_ADMITTER = f"{GROUP}/{VERSION}"
CLUSTER_QUEUES = Kind(_ADMITTER, "clusterqueues", False)
LOCAL_QUEUES = Kind(_ADMITTER, "localqueues", True)
WORKLOADS = Kind(_ADMITTER, "workloads", True)
TOPOLOGIES = Kind(_ADMITTER, "topologies", False)


class Kube:
    """JSON requests against one API server; counts writes for the benchmarks."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.writes = 0

    @classmethod
    async def from_kubeconfig(cls, path: str | None) -> Kube:
        configuration = client.Configuration()
        if path:
            await config.load_kube_config(config_file=path, client_configuration=configuration)
        else:
            config.load_incluster_config(client_configuration=configuration)
        return cls(client.ApiClient(configuration))

    async def close(self) -> None:
        await self.api.close()

    async def request(self, method: str, path: str, body: Any = None,
                      query: dict[str, str] | None = None,
                      content_type: str = "application/json") -> Obj:
        if method != "GET":
            self.writes += 1
        response = await self.api.call_api(
            path, method,
            query_params=list((query or {}).items()),
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body, auth_settings=["BearerToken"], _preload_content=False,
        )
        async with response:
            data = await response.read()
            if not 200 <= response.status <= 299:
                raise ApiException(status=response.status, reason=data.decode(errors="replace"))
        result: Obj = json.loads(data) if data else {}
        return result

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj:
        return await self.request("GET", kind.path(namespace, name))

    async def list(self, kind: Kind, query: dict[str, str] | None = None) -> Obj:
        return await self.request("GET", kind.path(), query=query)

    async def create(self, kind: Kind, obj: Obj) -> Obj:
        namespace = obj["metadata"].get("namespace")
        return await self.request("POST", kind.path(namespace), obj)

    async def patch(self, kind: Kind, name: str, patch: Any, namespace: str | None = None,
                    subresource: str | None = None, content_type: str = MERGE_PATCH) -> Obj:
        return await self.request("PATCH", kind.path(namespace, name, subresource), patch,
                                  content_type=content_type)

    async def watch(self, kind: Kind, resource_version: str,
                    query: dict[str, str] | None = None) -> AsyncIterator[Obj]:
        """Watch events from `resource_version`; raises ApiException(410) when it is too old."""
        params = {**(query or {}), "watch": "true", "resourceVersion": resource_version,
                  "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
        response = await self.api.call_api(
            kind.path(), "GET", query_params=list(params.items()),
            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
            _preload_content=False,
        )
        async with response:
            if not 200 <= response.status <= 299:
                body = (await response.read()).decode(errors="replace")
                raise ApiException(status=response.status, reason=body)
            async for line in response.content:
                if not line.strip():
                    continue
                event: Obj = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object", {})
                    raise ApiException(status=status.get("code", 500),
                                       reason=status.get("message", "watch error"))
                yield event


def is_conflict(error: ApiException) -> bool:
    return error.status == 409


def is_not_found(error: ApiException) -> bool:
    return error.status == 404


async def each(writes: list[Coroutine[Any, Any, None]]) -> None:
    """Run writes with at most WRITE_CONCURRENCY in flight; every write is attempted even when
    one fails, then the first failure is raised (the next pass retries from the API state)."""
    gate = asyncio.Semaphore(WRITE_CONCURRENCY)

    async def gated(write: Coroutine[Any, Any, None]) -> None:
        async with gate:
            await write

    results = await asyncio.gather(*(gated(w) for w in writes), return_exceptions=True)
    for outcome in results:
        if isinstance(outcome, BaseException):
            raise outcome
