"""The controller's edge under faults, driven by a scripted transport: requests time out and
retry when the API server cannot be reached or after the wait a 429 names, lists are
paginated, a replica that cannot prove its lease writes nothing and stops its work, leader
election survives an API server that went away, and the informer treats resourceVersions as
opaque. (The integration tests inject the same faults into the real control plane.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.workload import Reason
from admitter.controller.leader import Elector
from admitter.kube import client as kube
from admitter.kube.client import (
    ATTEMPTS,
    REQUEST_TIMEOUT,
    RETRY_AFTER_BOUNDS,
    THROTTLED_ATTEMPTS,
    Kube,
    NotLeading,
    _retry_after,
)
from admitter.kube.events import REPEAT_AFTER, EventRecorder
from admitter.kube.informer import Informer
from admitter.kube.objects import Obj

Answer = Callable[[str, str, dict[str, str], Any],
                  "Obj | BaseException | asyncio.Event | _Response"]


class _Response:
    def __init__(self, status: int, body: Obj | str, headers: dict[str, str] | None = None,
                 ) -> None:
        self.status = status
        self.headers = headers or {}
        self._data = (body if isinstance(body, str) else json.dumps(body)).encode()

    async def __aenter__(self) -> _Response:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    async def read(self) -> bytes:
        return self._data


class ScriptedTransport:
    """Stands in for kubernetes_asyncio's ApiClient: `answer` says what each request gets,
    an object (200), an exception to raise, an Event to hang on until set, or a response."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str, dict[str, str], Any]] = []
        self.timeouts: list[aiohttp.ClientTimeout] = []

    async def call_api(self, path: str, method: str, query_params: list[tuple[str, str]],
                       header_params: dict[str, str], body: Any, auth_settings: list[str],
                       _preload_content: bool, _request_timeout: aiohttp.ClientTimeout,
                       ) -> _Response:
        query = dict(query_params)
        self.calls.append((method, path, query, body))
        self.timeouts.append(_request_timeout)
        outcome = self.answer(method, path, query, body)
        if isinstance(outcome, _Response):
            return outcome
        if isinstance(outcome, asyncio.Event):
            await outcome.wait()
            outcome = {}
        if isinstance(outcome, ApiException):
            return _Response(outcome.status, {"message": outcome.reason})
        if isinstance(outcome, BaseException):
            raise outcome
        return _Response(200, outcome)


def refused() -> aiohttp.ClientConnectionError:
    return aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:6443")


def client(answer: Answer) -> tuple[Kube, ScriptedTransport]:
    transport = ScriptedTransport(answer)
    return Kube(transport), transport  # type: ignore[arg-type]


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The seconds Kube waited between attempts, none of them really slept."""
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(kube.asyncio, "sleep", record)
    return slept


async def test_a_request_times_out_and_retries_when_the_api_server_cannot_be_reached(
        waits: list[float]) -> None:
    failures = [refused(), TimeoutError()]
    api, transport = client(lambda *_: failures.pop(0) if failures else {"ok": True})
    assert await api.request("GET", "/api/v1/nodes") == {"ok": True}
    assert len(transport.calls) == 3 and waits == [0.25, 0.5]
    assert all(t.total == REQUEST_TIMEOUT for t in transport.timeouts), "never unbounded"

    down, transport = client(lambda *_: refused())
    with pytest.raises(aiohttp.ClientConnectionError):
        await down.request("PATCH", "/apis/batch/v1/namespaces/ns/jobs/j", {})
    assert len(transport.calls) == ATTEMPTS, "then the caller's own retry takes over"


def throttled(retry_after: str | None = "1", details: object = None) -> _Response:
    """A 429 as the API server sends it: max-inflight and priority-and-fairness rejections
    carry a Retry-After header and a plain-text body; a Status body (storage that is
    re-initializing) names the wait in its details as well."""
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    if details is None:
        return _Response(429, "Too many requests, please try again later.", headers)
    return _Response(429, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "reason": "TooManyRequests", "code": 429, "details": details},
                     headers)


async def test_a_throttled_request_is_tried_again_after_the_wait_it_names(
        waits: list[float]) -> None:
    answers = [throttled("3"), throttled(None, {"retryAfterSeconds": 2})]
    api, transport = client(lambda *_: answers.pop(0) if answers else {"ok": True})
    assert await api.request("POST", "/api/v1/namespaces/ns/events", {}) == {"ok": True}
    assert len(transport.calls) == 3
    assert waits == [3.0, 2.0], "the header, else the Status details"


async def test_a_request_throttled_throttled_attempts_times_fails_with_the_429(
        waits: list[float]) -> None:
    api, transport = client(lambda *_: throttled("10"))
    with pytest.raises(ApiException) as raised:
        await api.request("GET", "/api/v1/nodes")
    assert raised.value.status == 429
    assert len(transport.calls) == THROTTLED_ATTEMPTS
    assert waits == [10.0] * (THROTTLED_ATTEMPTS - 1), "no wait after the last attempt"


async def test_other_errors_are_not_tried_again(waits: list[float]) -> None:
    api, transport = client(lambda *_: ApiException(status=409, reason="conflict"))
    with pytest.raises(ApiException):
        await api.request("PUT", "/api/v1/nodes/a", {})
    assert len(transport.calls) == 1 and waits == []


@pytest.mark.parametrize(("retry_after", "details", "waited"), [
    (None, None, 1.0),  # plain-text body, no header
    ("soon", None, 1.0),
    ("Wed, 21 Oct 2026 07:28:00 GMT", None, 1.0),  # an HTTP date: seconds only
    ("nan", None, 1.0),
    (None, {"retryAfterSeconds": "later"}, 1.0),
    (None, {"retryAfterSeconds": None}, 1.0),
    (None, {"retryAfterSeconds": float("nan")}, 1.0),
    (None, ["not", "a", "map"], 1.0),
    ("0", None, RETRY_AFTER_BOUNDS[0]),
    ("-5", None, RETRY_AFTER_BOUNDS[0]),
    ("3600", None, RETRY_AFTER_BOUNDS[1]),
    ("inf", None, RETRY_AFTER_BOUNDS[1]),
    (None, {"retryAfterSeconds": 1e308}, RETRY_AFTER_BOUNDS[1]),
])
async def test_a_missing_or_unreadable_retry_after_falls_back_to_a_bounded_wait(
        waits: list[float], retry_after: str | None, details: object, waited: float) -> None:
    answers = [throttled(retry_after, details)]
    api, _ = client(lambda *_: answers.pop(0) if answers else {})
    assert await api.request("GET", "/api/v1/nodes") == {}
    assert waits == [waited]


@given(header=st.one_of(st.none(), st.text(max_size=12),
                        st.floats().map(str), st.integers().map(str)),
       details=st.one_of(st.none(), st.dictionaries(
           st.just("retryAfterSeconds"),
           st.one_of(st.floats(), st.integers(), st.text(max_size=5), st.none()))))
def test_every_wait_after_a_429_is_within_bounds(header: str | None, details: object) -> None:
    response = throttled(header, details)
    error = ApiException(status=429, reason=response._data.decode())
    error.headers = response.headers
    least, most = RETRY_AFTER_BOUNDS
    assert least <= _retry_after(error) <= most


async def test_a_replica_that_cannot_prove_its_lease_sends_no_write() -> None:
    api, transport = client(lambda *_: {})
    fenced = api.fenced(lambda: False)
    with pytest.raises(NotLeading):
        await fenced.patch(kube.WORKLOADS, "w", {"status": {}}, "ns", subresource="status")
    assert await fenced.get(kube.JOBS, "j", "ns") == {}, "reads go on"
    assert [method for method, *_ in transport.calls] == ["GET"]


async def test_lists_are_fetched_a_page_at_a_time() -> None:
    pages = {"": ("first", ["a", "b"]), "first": ("second", ["c"]), "second": ("", ["d"])}

    def answer(_method: str, _path: str, query: dict[str, str], _body: Any) -> Obj:
        token, names = pages[query.get("continue", "")]
        return {"kind": "NodeList", "metadata": {"resourceVersion": "41", "continue": token},
                "items": [{"metadata": {"name": n}} for n in names]}

    api, transport = client(answer)
    listed = await api.list(kube.NODES)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["a", "b", "c", "d"]
    assert all(query["limit"] == str(kube.PAGE_SIZE) for _, _, query, _ in transport.calls)
    assert listed["metadata"]["resourceVersion"] == "41"


class LeaseServer:
    """One Lease, or none; `down` makes every request fail to connect, `hang` makes them
    hang until released."""

    def __init__(self) -> None:
        self.lease: Obj | None = None
        self.version = 0
        self.down = False
        self.hang: asyncio.Event | None = None

    def __call__(self, method: str, _path: str, _query: dict[str, str],
                 body: Any) -> Obj | BaseException | asyncio.Event:
        if self.hang is not None:
            return self.hang
        if self.down:
            return refused()
        if method == "GET":
            return self.lease or ApiException(status=404, reason="not found")
        if self.lease is not None and body["metadata"].get("resourceVersion") != str(
                self.version):
            return ApiException(status=409, reason="conflict")
        self.version += 1
        self.lease = {**body, "metadata": {**body["metadata"],
                                           "resourceVersion": str(self.version)}}
        return self.lease


async def test_leader_election_survives_the_api_server_going_away() -> None:
    """kubernetes-asyncio's LeaseLock caught only ApiException: a refused connection ended
    every replica. Now the leader stops working when it cannot renew, and leads again."""
    server = LeaseServer()
    api, _ = client(server)
    elector = Elector(api, "admitter-system", "admitter", "replica-a", lease_seconds=3)
    elector.retry_period = 0.05
    started: list[float] = []
    cancelled: list[float] = []

    async def work() -> None:
        started.append(elector.clock())
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.append(elector.clock())

    running = asyncio.create_task(elector.run(work))
    try:
        await _until(lambda: bool(started))
        server.down = True
        await _until(lambda: bool(cancelled))
        assert not elector.leading(), "no proof of the lease, no writes"
        assert cancelled[0] <= elector.proven_until + 0.05
        server.down = False
        await _until(lambda: len(started) == 2)
        assert not running.done(), "the replica never exits"
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_a_hung_lease_request_ends_leadership_at_the_renew_deadline() -> None:
    server = LeaseServer()
    api, _ = client(server)
    elector = Elector(api, "admitter-system", "admitter", "replica-a", lease_seconds=3)
    elector.retry_period = 0.05
    assert await elector.try_acquire_or_renew(timeout=1.0)
    deadline = elector.proven_until
    server.hang = asyncio.Event()
    renewed = await elector.try_acquire_or_renew(timeout=max(0.0, deadline - elector.clock()))
    assert not renewed and elector.proven_until == deadline
    assert not elector.leading() and elector.clock() >= deadline
    server.hang.set()


async def test_a_lease_held_by_another_replica_is_taken_only_after_it_expires() -> None:
    server = LeaseServer()
    api, _ = client(server)
    now = [1000.0]
    first = Elector(api, "ns", "lease", "a", lease_seconds=3, clock=lambda: now[0])
    second = Elector(api, "ns", "lease", "b", lease_seconds=3, clock=lambda: now[0])
    assert await first.try_acquire_or_renew(timeout=1.0)
    assert not await second.try_acquire_or_renew(timeout=1.0)
    now[0] += 2.0
    assert not await second.try_acquire_or_renew(timeout=1.0), "seen 2 s ago: still held"
    now[0] += 1.5
    assert not first.leading(), "the old leader stopped before anyone can take over"
    assert await second.try_acquire_or_renew(timeout=1.0)
    assert server.lease is not None and server.lease["spec"]["holderIdentity"] == "b"
    assert server.lease["spec"]["leaseTransitions"] == 1


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(400):
        if condition():
            return
        await asyncio.sleep(0.025)
    raise AssertionError("condition never held")


def test_resource_versions_are_opaque() -> None:
    """Kubernetes promises no order between resourceVersions; the informer only knows which
    versions its watch delivered, and in what order."""
    informer = Informer(None, kube.NODES, lambda *_: None)  # type: ignore[arg-type]

    def node(version: str) -> Obj:
        return {"metadata": {"name": "a", "resourceVersion": version}}

    def stored() -> str:
        return str(informer.store[("", "a")]["metadata"]["resourceVersion"])

    informer._apply({"type": "ADDED", "object": node("zz-1")})
    informer.observe(node("aa-3"))  # our write's answer, ahead of the watch
    informer._apply({"type": "MODIFIED", "object": node("zz-2")})
    assert stored() == "aa-3", "a version delivered before ours is older"
    informer._apply({"type": "MODIFIED", "object": node("aa-3")})
    informer._apply({"type": "MODIFIED", "object": node("b")})
    assert stored() == "b", "after ours, the watch is followed again"
    informer.observe(node("b"))
    informer._apply({"type": "MODIFIED", "object": node("a")})
    assert stored() == "a", "an answer the watch already delivered is not waited for"


def test_the_event_recorder_forgets_what_can_no_longer_suppress_an_event() -> None:
    async def run() -> int:
        recorder = EventRecorder(Kube(None), "test")  # type: ignore[arg-type]
        for i in range(1000):
            obj = {"metadata": {"name": f"j{i}", "namespace": "ns", "uid": f"u{i}"}}
            recorder.record(obj, "Job", "Normal", Reason.ADMITTED, "m", float(i), REPEAT_AFTER)
        for task in list(recorder.sending):
            task.cancel()
        return len(recorder._last)

    assert asyncio.run(run()) <= 2 * REPEAT_AFTER


def test_an_object_deleted_by_the_controller_is_followed_again_once_its_deletion_is_seen(
        ) -> None:
    informer = Informer(None, kube.WORKLOADS, lambda *_: None)  # type: ignore[arg-type]

    def wl(uid: str, version: str) -> Obj:
        return {"metadata": {"name": "w", "namespace": "ns", "uid": uid,
                             "resourceVersion": version}}

    informer._apply({"type": "ADDED", "object": wl("old", "1")})
    informer.forget(wl("old", "1"))
    assert informer.get("ns", "w") is None
    informer._apply({"type": "MODIFIED", "object": wl("old", "2")})
    assert informer.get("ns", "w") is None, "an event from before the deletion"
    informer._apply({"type": "DELETED", "object": wl("old", "3")})
    informer._apply({"type": "ADDED", "object": wl("new", "4")})
    assert informer.get("ns", "w") == wl("new", "4")

    # The watch may deliver the deletion before the DELETE request returns.
    informer._apply({"type": "DELETED", "object": wl("new", "5")})
    informer.forget(wl("new", "4"))
    informer._apply({"type": "ADDED", "object": wl("newer", "6")})
    assert informer.get("ns", "w") == wl("newer", "6"), "never stuck ignoring the name"
