"""A thin JSON client over kubernetes_asyncio's ApiClient.

admitter works on plain dicts (the API's own JSON) rather than generated model classes:
one code path for core kinds and admitter's CRDs, no (de)serialisation cost on every watch
event, and patches that say exactly which fields they touch.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import pydantic_core
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.base import GROUP, VERSION
from admitter.kube.objects import Obj

log = logging.getLogger(__name__)
WRITE_CONCURRENCY = 16
"""Writes in flight at once (`each`, the Event recorder): enough to keep the API server's
cores busy across the round trip of each (its CPU, 2.9-3.0 ms a write, is the bound, not the
client: BENCHMARKS.md, write ceiling), and a small part of the 200 mutating requests it serves
at once by default (`--max-mutating-requests-inflight`), so a burst of admissions leaves room
for the writes of every other client."""
REQUEST_TIMEOUT = 30.0
"""Seconds a request may take in all: without a bound, a request to an API server that was
stopped mid-answer (or a path cut) hangs forever and holds up whatever awaits it."""
WATCH_TIMEOUT = 300
"""Seconds the API server keeps a watch open (`timeoutSeconds`): client-go's reflector asks for
5 to 10 minutes, and this is the shortest. An ended watch resumes from its resourceVersion at
the cost of one request, and watches that end now and then spread over a cluster's API servers
again after one of them restarted."""
WATCH_GRACE = 30
"""Seconds past WATCH_TIMEOUT after which the client gives up on a watch: the API server ends
the watch itself, so only one whose server stopped answering mid-stream (stopped, its path
cut) gets here, and the informer's cache then resumes instead of going stale forever."""
ATTEMPTS = 4
"""Tries of a request that could not reach the API server (connection refused or reset,
timed out), waiting 0.25, 0.5, 1 s between them (CONNECT_BACKOFF); then the error is raised
to the caller, which retries later (the next pass, the informer's backoff)."""
CONNECT_BACKOFF = 0.25
"""Seconds before the second try of a request that could not reach the API server, doubled
before each next: a reset connection or an API server handing over is usually back within a
second, and the waits between ATTEMPTS add up to 1.75 s, short next to a pass that awaits
them."""
THROTTLED_ATTEMPTS = 10
"""Tries of a request the API server answered 429 (too many requests, or storage that is
re-initializing after an etcd restart), each after the Retry-After it names (client-go's
default too): the condition passes in seconds, and failing the request would fail a whole pass
or an informer's re-list meanwhile."""
RETRY_AFTER_BOUNDS = (0.1, 10.0)
"""Least and most seconds waited after a 429, whatever it names: no busy loop on a zero, and
no pass or re-list held up for minutes (THROTTLED_ATTEMPTS bound the total wait too)."""
DEFAULT_RETRY_AFTER = 1.0
"""Seconds waited after a 429 that names no wait in seconds: what the API server's own
max-in-flight throttling names (Retry-After: 1), so a 429 from a proxy in front of it that
names nothing is waited out as one from the API server would be."""
PAGE_SIZE = 500
"""Objects per page of a list (`limit`): client-go's informers list 500 at a time too, a
page the API server builds in milliseconds while a re-list of tens of thousands of Workloads
never holds one response of hundreds of megabytes in memory."""
QUOTED_REASON_LIMIT = 300
"""Most characters of an API server's answer quoted in a condition's message (`brief_reason`):
its reason may be a whole Status object or a proxy's HTML page, and a condition is read in
`kubectl describe`, where a few lines say what went wrong."""
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError, TimeoutError)
"""What a request raises when the API server cannot be reached or does not answer."""
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def decode(data: bytes) -> Any:
    """JSON from the API server, with its keys and short strings shared across objects.

    The caches hold every job, Workload, pod and node at once, and each watch event is decoded
    on its own: with `json.loads` every object carries its own copy of every key ("metadata",
    "resources", ...). pydantic-core's decoder keeps one copy of each short string in a cache
    of its own, which halves what a cached Job costs and decodes faster
    (benchmarks/bench_controller_memory.py)."""
    return pydantic_core.from_json(data, cache_strings="all")


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
JOBSETS = Kind("jobset.x-k8s.io/v1alpha2", "jobsets", True)
RAYJOBS = Kind("ray.io/v1", "rayjobs", True)
PRIORITY_CLASSES = Kind("scheduling.k8s.io/v1", "priorityclasses", False)
LEASES = Kind("coordination.k8s.io/v1", "leases", True)
MUTATING_WEBHOOK_CONFIGURATIONS = Kind("admissionregistration.k8s.io/v1",
                                       "mutatingwebhookconfigurations", False)
VALIDATING_WEBHOOK_CONFIGURATIONS = Kind("admissionregistration.k8s.io/v1",
                                         "validatingwebhookconfigurations", False)
_DRA = "resource.k8s.io/v1"
RESOURCE_CLAIM_TEMPLATES = Kind(_DRA, "resourceclaimtemplates", True)
RESOURCE_CLAIMS = Kind(_DRA, "resourceclaims", True)
RESOURCE_SLICES = Kind(_DRA, "resourceslices", False)
DEVICE_CLASSES = Kind(_DRA, "deviceclasses", False)
_ADMITTER = f"{GROUP}/{VERSION}"
CLUSTER_QUEUES = Kind(_ADMITTER, "clusterqueues", False)
LOCAL_QUEUES = Kind(_ADMITTER, "localqueues", True)
WORKLOADS = Kind(_ADMITTER, "workloads", True)
TOPOLOGIES = Kind(_ADMITTER, "topologies", False)
WORKER_CLUSTERS = Kind(_ADMITTER, "workerclusters", False)
SECRETS = Kind("v1", "secrets", True)


class NotLeading(ApiException):
    """A write refused before it was sent: this replica cannot prove it holds the lease."""

    def __init__(self) -> None:
        super().__init__(status=0, reason="not the leader: write refused")


class Kube:
    """JSON requests against one API server.

    `fence`, when set, is asked before every write: a replica that cannot prove it leads
    sends none (another replica may be leading by now)."""

    def __init__(self, api: client.ApiClient, fence: Callable[[], bool] | None = None) -> None:
        self.api = api
        self.fence = fence

    def fenced(self, fence: Callable[[], bool]) -> Kube:
        """The same connection, writing only while `fence()` holds."""
        return Kube(self.api, fence)

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
        """One request, tried again when the API server cannot be reached (ATTEMPTS) or asks
        to be called back later (THROTTLED_ATTEMPTS)."""
        failures = throttled = 0
        while True:
            if method != "GET" and self.fence is not None and not self.fence():
                raise NotLeading()
            try:
                return await self._request(method, path, body, query, content_type)
            except ApiException as error:
                throttled += 1
                if error.status != 429 or throttled == THROTTLED_ATTEMPTS:
                    raise
                log.info("%s %s: 429 %s; trying again", method, path, error.reason)
                await asyncio.sleep(_retry_after(error))
            except CONNECTION_ERRORS as error:
                failures += 1
                if failures == ATTEMPTS:
                    raise
                log.info("%s %s: %r; trying again", method, path, error)
                await asyncio.sleep(CONNECT_BACKOFF * 2 ** (failures - 1))

    async def _request(self, method: str, path: str, body: Any, query: dict[str, str] | None,
                       content_type: str) -> Obj:
        response = await self.api.call_api(
            path, method,
            query_params=list((query or {}).items()),
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body, auth_settings=["BearerToken"], _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
        )
        async with response:
            data = await response.read()
            if not 200 <= response.status <= 299:
                error = ApiException(status=response.status, reason=data.decode(errors="replace"))
                error.headers = response.headers
                raise error
        result: Obj = decode(data) if data else {}
        return result

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj:
        return await self.request("GET", kind.path(namespace, name))

    async def list(self, kind: Kind, query: dict[str, str] | None = None) -> Obj:
        """Every object of a kind, fetched PAGE_SIZE at a time (one consistent snapshot:
        every page is read at the first page's resourceVersion); a continue token that
        expired raises ApiException(410), as a watch from a compacted version does."""
        params = {**(query or {}), "limit": str(PAGE_SIZE)}
        listed = await self.request("GET", kind.path(), query=params)
        items: list[Obj] = listed.get("items") or []
        while token := (listed.get("metadata") or {}).get("continue"):
            listed = await self.request("GET", kind.path(), query={**params, "continue": token})
            items.extend(listed.get("items") or [])
        listed["items"] = items
        return listed

    async def create(self, kind: Kind, obj: Obj) -> Obj:
        namespace = obj["metadata"].get("namespace")
        return await self.request("POST", kind.path(namespace), obj)

    async def patch(self, kind: Kind, name: str, patch: Any, namespace: str | None = None,
                    subresource: str | None = None, content_type: str = MERGE_PATCH) -> Obj:
        return await self.request("PATCH", kind.path(namespace, name, subresource), patch,
                                  content_type=content_type)

    async def delete(self, kind: Kind, name: str, namespace: str | None = None,
                     options: Obj | None = None) -> Obj:
        return await self.request("DELETE", kind.path(namespace, name), options)

    async def replace(self, kind: Kind, obj: Obj) -> Obj:
        """PUT the whole object; conflicts (409) unless `obj` carries the current
        resourceVersion."""
        meta = obj["metadata"]
        return await self.request("PUT", kind.path(meta.get("namespace"), meta["name"]), obj)

    async def watch(self, kind: Kind, resource_version: str,
                    query: dict[str, str] | None = None) -> AsyncIterator[Obj]:
        """Watch events from `resource_version`; raises ApiException(410) when it is too old."""
        params = {**(query or {}), "watch": "true", "resourceVersion": resource_version,
                  "allowWatchBookmarks": "true", "timeoutSeconds": str(WATCH_TIMEOUT)}
        response = await self.api.call_api(
            kind.path(), "GET", query_params=list(params.items()),
            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=WATCH_TIMEOUT + WATCH_GRACE,
                                                   sock_connect=REQUEST_TIMEOUT),
        )
        async with response:
            if not 200 <= response.status <= 299:
                body = (await response.read()).decode(errors="replace")
                raise ApiException(status=response.status, reason=body)
            async for line in response.content:
                if not line.strip():
                    continue
                event: Obj = decode(line)
                if event.get("type") == "ERROR":
                    status = event.get("object", {})
                    raise ApiException(status=status.get("code", 500),
                                       reason=status.get("message", "watch error"))
                yield event


def is_conflict(error: ApiException) -> bool:
    return error.status == 409


def is_not_found(error: ApiException) -> bool:
    return error.status == 404


def brief_reason(error: ApiException) -> str:
    """The API server's answer on one line, cut at QUOTED_REASON_LIMIT characters."""
    return " ".join(str(error.reason).split())[:QUOTED_REASON_LIMIT]


async def each(writes: Sequence[Coroutine[Any, Any, object]]) -> None:
    """Run writes with at most WRITE_CONCURRENCY in flight; every write is attempted even when
    one fails, then the first failure is raised (the next pass retries from the API state)."""
    gate = asyncio.Semaphore(WRITE_CONCURRENCY)

    async def gated(write: Coroutine[Any, Any, object]) -> None:
        try:
            async with gate:
                await write
        finally:
            write.close()  # cancelled before its turn (a lost lease): never started

    results = await asyncio.gather(*(gated(w) for w in writes), return_exceptions=True)
    for outcome in results:
        if isinstance(outcome, BaseException):
            raise outcome


def _retry_after(error: ApiException) -> float:
    """The seconds a 429 asks the client to wait: its Retry-After header (the API server's own
    throttling sends one with a plain-text body), else its Status details (storage that is
    re-initializing names them there too), else DEFAULT_RETRY_AFTER; within
    RETRY_AFTER_BOUNDS."""
    headers: Mapping[str, str] = error.headers or {}
    named: Any = headers.get("Retry-After")
    if named is None:
        try:
            named = (json.loads(error.reason or "{}").get("details") or {}).get(
                "retryAfterSeconds")
        except (ValueError, AttributeError):
            named = None
    try:
        seconds = float(named)
    except (TypeError, ValueError):  # absent, or an HTTP date: client-go reads seconds only
        seconds = DEFAULT_RETRY_AFTER
    if math.isnan(seconds):
        seconds = DEFAULT_RETRY_AFTER
    least, most = RETRY_AFTER_BOUNDS
    return min(max(seconds, least), most)
