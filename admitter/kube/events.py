"""Kubernetes Events on Jobs and Workloads, rate-limited per object and reason so a busy
cluster is not flooded, and sent in the background: an Event is best effort and never holds
up the writes that carry a decision out."""

from __future__ import annotations

import asyncio
import json
import logging

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj, format_time

log = logging.getLogger(__name__)
REPEAT_AFTER = 300.0
"""Seconds within which the same Event on the same object is not sent again: a condition that
persists (a Job that breaks the contract, a problem the install check finds) is reported
every pass otherwise, one Event per second or so; once in five minutes still shows in
`kubectl get events` and `kubectl describe` as current (the API server keeps Events an hour
by default, `--event-ttl`)."""
COMPONENT = "admitter"
"""The Events' `source.component` and `reportingComponent`, by which `kubectl admitter explain`
picks admitter's Events out of an object's."""

MESSAGE_LIMIT = 1024
"""Most characters of an Event's message: the API server refuses a longer note from
events.k8s.io/v1 clients (`NoteLengthLimit`) and kube-scheduler cuts its own Events' messages
there too; an Event is a line read in `kubectl describe`, not a report."""
REFUSED_FOR_CONTENT = (400, 422)
"""The API server's answers to a write it will never accept as written (malformed, or
invalid: a Workload of more pod sets than it holds), unlike a conflict or an outage that
the next pass outlives."""


def refusal(error: BaseException) -> str | None:
    """The API server's message when it refused a write for what it carried, else None."""
    if not isinstance(error, ApiException) or error.status not in REFUSED_FOR_CONTENT:
        return None
    try:
        message = json.loads(error.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message or error.reason or error.status)


class EventRecorder:
    def __init__(self, client: Kube, identity: str) -> None:
        self.kube = client
        self.identity = identity
        self._last: dict[tuple[str, str], tuple[str, float]] = {}
        """(object, reason) → the message last recorded and when; entries older than
        REPEAT_AFTER can suppress nothing and are pruned once per REPEAT_AFTER, so the map
        holds only recent Events, not one per object ever seen."""
        self._pruned_at = -REPEAT_AFTER
        self._gate = asyncio.Semaphore(kube.WRITE_CONCURRENCY)
        self.sending: set[asyncio.Task[None]] = set()
        """Events on their way to the API server."""

    def record(self, obj: Obj, kind: str, event_type: str, reason: str, message: str,
               now: float, repeat_after: float = 0.0, per_reason: bool = False) -> None:
        """Send an Event unless the same reason and message (`per_reason`: the same reason,
        whatever its message) were recorded for this object within `repeat_after` seconds."""
        self._prune(now)
        meta = obj["metadata"]
        key = (meta.get("uid", meta["name"]), reason)
        last = self._last.get(key)
        if (last is not None and (per_reason or last[0] == message)
                and now - last[1] < repeat_after):
            return
        self._last[key] = (message, now)
        # Events on cluster-scoped objects (Nodes, ClusterQueues) live in "default".
        namespace = meta.get("namespace") or "default"
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", ""), "kind": kind, "name": meta["name"],
                "namespace": meta.get("namespace", ""), "uid": meta.get("uid", ""),
            },
            "type": event_type, "reason": reason, "message": message[:MESSAGE_LIMIT],
            "firstTimestamp": format_time(now), "lastTimestamp": format_time(now), "count": 1,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT, "reportingInstance": self.identity,
        }
        task = asyncio.create_task(self._send(event))
        self.sending.add(task)
        task.add_done_callback(self.sending.discard)

    def _prune(self, now: float) -> None:
        if now - self._pruned_at < REPEAT_AFTER:
            return
        self._pruned_at = now
        self._last = {key: last for key, last in self._last.items()
                      if now - last[1] < REPEAT_AFTER}

    async def _send(self, event: Obj) -> None:
        async with self._gate:
            try:
                await self.kube.create(kube.EVENTS, event)
            except Exception as error:  # best effort: a lost Event must not fail anything
                involved = event["involvedObject"]
                log.warning("event %s on %s/%s not recorded: %s", event["reason"],
                            involved["namespace"], involved["name"], error)
