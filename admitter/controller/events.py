"""Kubernetes Events on Jobs and Workloads, rate-limited per object and reason so a busy
cluster is not flooded (pending reasons repeat every cycle; admissions and evictions do not)."""

from __future__ import annotations

import logging

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.controller import kube
from admitter.controller.kube import Kube, Obj
from admitter.controller.translate import format_time

log = logging.getLogger(__name__)
REPEAT_AFTER = 300.0
COMPONENT = "admitter"


class EventRecorder:
    def __init__(self, client: Kube, identity: str) -> None:
        self.kube = client
        self.identity = identity
        self._last: dict[tuple[str, str], tuple[str, float]] = {}

    async def record(self, obj: Obj, kind: str, event_type: str, reason: str, message: str,
                     now: float, repeat_after: float = 0.0) -> None:
        """Create an Event unless the same reason and message were recorded for this object
        within `repeat_after` seconds."""
        meta = obj["metadata"]
        key = (meta.get("uid", meta["name"]), reason)
        last = self._last.get(key)
        if last is not None and last[0] == message and now - last[1] < repeat_after:
            return
        self._last[key] = (message, now)
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", ""), "kind": kind, "name": meta["name"],
                "namespace": meta["namespace"], "uid": meta.get("uid", ""),
            },
            "type": event_type, "reason": reason, "message": message[:1024],
            "firstTimestamp": format_time(now), "lastTimestamp": format_time(now), "count": 1,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT, "reportingInstance": self.identity,
        }
        try:
            await self.kube.create(kube.EVENTS, event)
        except ApiException as error:
            log.warning("event %s on %s/%s not recorded: %s", reason, meta["namespace"],
                        meta["name"], error.status)
