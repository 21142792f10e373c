"""What the webhooks read from the cluster, behind a Protocol small enough for any cache."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from pydantic import ValidationError

from admitter.api.base import GROUP, VERSION, Resource
from admitter.api.clusterqueue import ClusterQueue
from admitter.api.localqueue import LocalQueue
from admitter.api.topology import Topology
from admitter.api.workload import Workload

log = logging.getLogger(__name__)

LOOKUP_TIMEOUT = 2.0
"""Seconds one read may take. The API server waits `TIMEOUT_SECONDS` for the whole webhook
call and a decision may read several kinds in turn, so each read is bounded well below it
(and the decision as a whole by the server's `DECISION_TIMEOUT`)."""

_Kind = TypeVar("_Kind", bound=Resource)
_Read = TypeVar("_Read")


class Lookup(Protocol):
    """Current admitter objects; the controller may implement it over its informer cache."""

    async def local_queues(self, namespace: str, fresh: bool = False) -> list[LocalQueue]:
        """`fresh`: read now, never an answer shared with earlier callers."""
        ...

    async def cluster_queues(self) -> list[ClusterQueue]: ...

    async def topologies(self) -> list[Topology]: ...

    async def workload(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Workload object as stored, or None when there is none."""
        ...

    async def priority_value(self, priority_class: str) -> int | None:
        """The PriorityClass's value, or None when there is no such class."""
        ...

    async def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        """The Namespace's labels, or None when there is no such namespace."""
        ...

    async def resource_claim_template(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The ResourceClaimTemplate as stored, or None when there is none."""
        ...


class LookupTimeout(Exception):
    """A read the API server did not answer in time: the request is denied (fail closed)."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"reading {what} from the API server took longer than {seconds:g}s")


class ApiLookup:
    """Reads straight from the API server, so a queue created a moment ago is already seen.

    Uncached on purpose: a webhook denial based on a stale cache is a user-visible error, and
    each request needs at most one LIST per kind.
    """

    def __init__(self, api: client.ApiClient, timeout: float = LOOKUP_TIMEOUT) -> None:
        self._objects = client.CustomObjectsApi(api)
        self._scheduling = client.SchedulingV1Api(api)
        self._core = client.CoreV1Api(api)
        self._resource = client.ResourceV1Api(api)
        self._api = api
        self._timeout = timeout

    async def _bounded(self, what: str, read: Awaitable[_Read]) -> _Read:
        """`read`, given up after the timeout. Hazard: a request to an API server that stopped
        answering (or a cut path) otherwise hangs forever, and `SharedReads` would make every
        later call join the hung one."""
        try:
            async with asyncio.timeout(self._timeout):
                return await read
        except TimeoutError:
            raise LookupTimeout(what, self._timeout) from None

    async def local_queues(self, namespace: str, fresh: bool = False) -> list[LocalQueue]:
        answer = await self._bounded(
            f"the LocalQueues of namespace {namespace!r}",
            self._objects.list_namespaced_custom_object(GROUP, VERSION, namespace,
                                                        LocalQueue.plural))
        return _parse(LocalQueue, answer)

    async def cluster_queues(self) -> list[ClusterQueue]:
        answer = await self._bounded("the ClusterQueues", self._objects.list_cluster_custom_object(
            GROUP, VERSION, ClusterQueue.plural))
        return _parse(ClusterQueue, answer)

    async def topologies(self) -> list[Topology]:
        answer = await self._bounded("the Topologies", self._objects.list_cluster_custom_object(
            GROUP, VERSION, Topology.plural))
        return _parse(Topology, answer)

    async def _one(self, what: str, read: Awaitable[_Read]) -> _Read | None:
        """One object, or None when there is none (404)."""
        try:
            return await self._bounded(what, read)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    async def workload(self, namespace: str, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = await self._one(
            f"Workload {namespace}/{name}", self._objects.get_namespaced_custom_object(
                GROUP, VERSION, namespace, Workload.plural, name))
        return found

    async def priority_value(self, priority_class: str) -> int | None:
        found = await self._one(f"PriorityClass {priority_class!r}",
                                self._scheduling.read_priority_class(priority_class))
        value: int | None = None if found is None else found.value
        return value

    async def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        found = await self._one(f"Namespace {namespace!r}", self._core.read_namespace(namespace))
        labels: dict[str, str] | None = None if found is None else found.metadata.labels or {}
        return labels

    async def resource_claim_template(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = await self._one(f"ResourceClaimTemplate {namespace}/{name}",
                                self._resource.read_namespaced_resource_claim_template(
                                    name, namespace))
        # As the API's own JSON (camelCase), the form every reader of objects takes.
        template: dict[str, Any] | None = (None if found is None
                                           else self._api.sanitize_for_serialization(found))
        return template


class SharedReads:
    """A Lookup whose concurrent identical reads share one request to `inner`.

    Every Job creation calls the webhooks, and a burst of creations (32 in flight in the fill
    benchmark) made as many identical LISTs at once, which kept the API server busy answering
    the webhooks instead of creating Jobs. A read that joins one already in flight may miss an
    object created during that one round trip, so a Job naming a LocalQueue that the shared
    read lacks is checked again with a read of its own (`fresh`) before any denial.
    """

    def __init__(self, inner: Lookup) -> None:
        self._inner = inner
        self._in_flight: dict[tuple[str, str], asyncio.Future[Any]] = {}

    async def _shared(self, key: tuple[str, str], read: Callable[[], Awaitable[_Read]]) -> _Read:
        flight = self._in_flight.get(key)
        if flight is None or flight.done():
            flight = asyncio.ensure_future(read())
            self._in_flight[key] = flight
            flight.add_done_callback(lambda done: self._forget(key, done))
        found: _Read = await asyncio.shield(flight)
        return found

    def _forget(self, key: tuple[str, str], done: asyncio.Future[Any]) -> None:
        if self._in_flight.get(key) is done:
            del self._in_flight[key]

    async def local_queues(self, namespace: str, fresh: bool = False) -> list[LocalQueue]:
        if fresh:
            return await self._inner.local_queues(namespace, fresh=True)
        return await self._shared(("LocalQueue", namespace),
                                  lambda: self._inner.local_queues(namespace))

    async def cluster_queues(self) -> list[ClusterQueue]:
        return await self._shared(("ClusterQueue", ""), self._inner.cluster_queues)

    async def topologies(self) -> list[Topology]:
        return await self._shared(("Topology", ""), self._inner.topologies)

    async def workload(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._inner.workload(namespace, name)  # one Job's own: nothing to share

    async def priority_value(self, priority_class: str) -> int | None:
        return await self._shared(("PriorityClass", priority_class),
                                  lambda: self._inner.priority_value(priority_class))

    async def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        return await self._shared(("Namespace", namespace),
                                  lambda: self._inner.namespace_labels(namespace))

    async def resource_claim_template(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._inner.resource_claim_template(namespace, name)


def _parse(kind: type[_Kind], answer: dict[str, Any]) -> list[_Kind]:
    """Valid items only: an object stored before the webhook existed must not break others."""
    parsed = []
    for item in answer.get("items", []):
        try:
            parsed.append(kind.model_validate(item))
        except ValidationError as error:
            name = item.get("metadata", {}).get("name")
            log.warning("ignoring invalid %s %s: %s", kind.kind_name, name, error)
    return parsed
