"""Which node each waiting pod of an admitted workload goes to: the hosts its admission
counted it on (`Admission.pod_set_nodes`, kept on the Workload as its node hints), one pod per
counted slot.

A slot is taken by a live pod of the pod set that already has a node (bound, or pinned by an
earlier ungate); each waiting pod takes a free slot on a host that is up. A pod recreated by
its operator (a restarted Job pod) so takes the slot its predecessor left, on the same host
when only that one is free. A pod whose pod set has free slots only on hosts that are down is
stranded: its admission cannot be carried out as decided (docs/placement.md). A pod with no
free slot at all (its predecessor still holds it, terminating) waits for one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class WaitingPod:
    """A pod held by the placement gate: its key (for the caller) and its pod set's name."""

    key: str
    pod_set: str


@dataclass
class HostAssignment:
    """What to do with each waiting pod: ungate it for a host, or not."""

    hosts: dict[str, str] = field(default_factory=dict)
    """Pod key → the node it is pinned to."""
    stranded: list[str] = field(default_factory=list)
    """Pods whose only free slots are on hosts that are down."""
    waiting: list[str] = field(default_factory=list)
    """Pods with no free slot yet (more live pods than were admitted)."""
    anywhere: list[str] = field(default_factory=list)
    """Pods of a pod set the admission counted on no node (an admission without node
    hints): ungated without a host, in their domain as the job pins it."""


def assign_hosts(hinted: Mapping[str, Mapping[str, int]],
                 placed: Mapping[str, Mapping[str, int]],
                 pods: Sequence[WaitingPod], up: Collection[str]) -> HostAssignment:
    """Each of `pods` (in key order) to a host of `hinted` (pod set → node → pods admitted
    there) whose slots `placed` (pod set → node → live pods with that node) leaves free, among
    the hosts `up`; the host with the most free slots first (ties by name), so a pod set's
    pods fill what its admission counted evenly whatever order they come in."""
    free = {pod_set: {host: count - placed.get(pod_set, {}).get(host, 0)
                      for host, count in hosts.items()}
            for pod_set, hosts in hinted.items()}
    found = HostAssignment()
    for pod in sorted(pods, key=lambda p: p.key):
        slots = free.get(pod.pod_set, {})
        if not slots:
            found.anywhere.append(pod.key)
            continue
        open_hosts = [host for host, left in slots.items() if left > 0]
        usable = [host for host in open_hosts if host in up]
        if usable:
            host = min(usable, key=lambda h: (-slots[h], h))
            slots[host] -= 1
            found.hosts[pod.key] = host
        elif open_hosts:
            found.stranded.append(pod.key)
        else:
            found.waiting.append(pod.key)
    return found
