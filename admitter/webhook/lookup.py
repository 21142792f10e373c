"""What the webhooks read from the cluster, behind a Protocol small enough for any cache."""

from __future__ import annotations

import logging
from typing import Any, Protocol, TypeVar

from kubernetes_asyncio import client
from pydantic import ValidationError

from admitter.api.base import GROUP, VERSION, Resource
from admitter.api.clusterqueue import ClusterQueue
from admitter.api.localqueue import LocalQueue
from admitter.api.topology import Topology

log = logging.getLogger(__name__)

_Kind = TypeVar("_Kind", bound=Resource)


class Lookup(Protocol):
    """Current admitter objects; the controller may implement it over its informer cache."""

    async def local_queues(self, namespace: str) -> list[LocalQueue]: ...

    async def cluster_queues(self) -> list[ClusterQueue]: ...

    async def topologies(self) -> list[Topology]: ...


class ApiLookup:
    """Reads straight from the API server, so a queue created a moment ago is already seen.

    Uncached on purpose: a webhook denial based on a stale cache is a user-visible error, and
    each request needs at most one LIST per kind.
    """

    def __init__(self, api: client.ApiClient) -> None:
        self._objects = client.CustomObjectsApi(api)

    async def local_queues(self, namespace: str) -> list[LocalQueue]:
        answer = await self._objects.list_namespaced_custom_object(
            GROUP, VERSION, namespace, LocalQueue.plural
        )
        return _parse(LocalQueue, answer)

    async def cluster_queues(self) -> list[ClusterQueue]:
        answer = await self._objects.list_cluster_custom_object(GROUP, VERSION, ClusterQueue.plural)
        return _parse(ClusterQueue, answer)

    async def topologies(self) -> list[Topology]:
        answer = await self._objects.list_cluster_custom_object(GROUP, VERSION, Topology.plural)
        return _parse(Topology, answer)


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
