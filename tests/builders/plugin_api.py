"""A stand-in for the plugin's API client: it serves lists of objects per kind and answers
403 for the kinds a caller may not read cluster-wide or at all, as the API server would."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.kube.client import Kind


class FakeKube:
    """`objects` per kind plural; `cluster_forbidden` kinds may be listed in `namespace`
    only; `forbidden` kinds not at all. Every request is kept in `queries`."""

    def __init__(self, *, pods: list[dict[str, Any]] | None = None, namespace: str = "",
                 objects: dict[str, list[dict[str, Any]]] | None = None,
                 cluster_forbidden: tuple[str, ...] = (), forbidden: tuple[str, ...] = ()):
        self.objects = {"pods": pods or [], **(objects or {})}
        self.namespace = namespace
        self.cluster_forbidden = cluster_forbidden
        self.forbidden = forbidden
        self.queries: list[tuple[str, dict[str, str] | None]] = []

    async def list(self, kind: Kind, query: dict[str, str] | None = None) -> dict[str, Any]:
        if kind.plural in self.forbidden or kind.plural in self.cluster_forbidden:
            raise ApiException(status=403, reason="Forbidden")
        return {"items": self.objects.get(kind.plural, [])}

    async def request(self, method: str, path: str, body: Any = None,
                      query: dict[str, str] | None = None) -> dict[str, Any]:
        self.queries.append((path, query))
        plural = path.rsplit("/", 1)[-1]
        if plural in self.forbidden or (
                plural in self.cluster_forbidden
                and f"/namespaces/{self.namespace}/" not in path):
            raise ApiException(status=403, reason="Forbidden")
        items = self.objects.get(plural, [])
        if plural != "pods":
            items = [o for o in items if o["metadata"].get("namespace") in (None,
                                                                          self.namespace)]
        return {"items": items}

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any]:
        for obj in self.objects.get(kind.plural, []):
            if (obj["metadata"]["name"], obj["metadata"].get("namespace")) == (name, namespace):
                return obj
        raise ApiException(status=404, reason="NotFound")

    async def close(self) -> None:
        pass
