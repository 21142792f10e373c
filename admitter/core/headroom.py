"""A small headroom for short jobs, which long protected starts respect.

Once work is time-sliced, nearly everything running has started recently and is still inside
its protected min runtime (hours), so a short job would find neither idle GPUs nor any victim.
Hence a long funded start must leave GPUs that a short job could have at once
(`yielded_gpus`): idle, held by unfunded work, or held on one node by resumable long work past
its min runtime (a short job may requeue it, and it resumes without loss). It must leave them in
two ways:
- at least `needed` of them in the whole cluster, so that short jobs arriving together find
  room;
- and on at least one node, `ShortJobs.max_gpus` of them: a short job's pod runs on one node, so a
  pool of fragments (2 idle GPUs here, 1 there) holds no 4-GPU debug job however large it is.
  Whether a start keeps such a node depends on where it lands, so this is checked on its
  placement (`keeps_room`), reading per-node free GPUs from the node model.
Counting yielding work, and not only idle GPUs, is what keeps the room from standing idle: on a
64-GPU cluster one idle 4-GPU hole is 6 % of the GPUs, while work past its min runtime is
running nearly all the time. Work that spans nodes does not count (a short job would requeue a
whole gang for one pod), nor short work (it is never another short job's victim), nor work of a
non-preemptible priority.
A reserve is made of surplus, never of a queue's guarantee: a start that keeps every queue on
its path within its deserved GPUs (`guaranteed`, `QuotaLedger.within_deserved`) is not held
to either bound, and a swap that takes on every node only what its victims free there
(`takes_nothing`) leaves both as it found them, so it is not refused for them.
Short jobs (`ShortJobs.is_short`) may use the pool, and unfunded work may fill it; evicting
yielding work does not grow it (the GPUs only change hands inside it). A workload too large
ever to leave the pool (more GPUs than the cluster's minus the pool) is not held to it. The
drain's target (`exempt`) is not held to the count: it has waited past the starvation bound,
and a domain emptied for it would otherwise still wait for the rest of the cluster to refill
the pool. It must still keep the one node: some gang is starving nearly all the time on a
cluster with 2-3x demand, so an exemption from both would leave short jobs no room whenever
drains run (drained gangs would take the last idle GPUs of a small cluster).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from admitter.core.fit import Shape, capacity
from admitter.core.model import GPU, Phase, Workload
from admitter.core.nodes import ClusterState, held_per_node
from admitter.core.placement import Placement
from admitter.core.policy import ShortJobs


def room_needed(gpus: int, short_gpus: float, short_jobs: ShortJobs) -> tuple[int, str]:
    """How many of `gpus` schedulable GPUs the pool keeps, and why: what short jobs held on
    average over the window (`short_gpus`, rounded up), as by Little's law that is how many
    GPUs their arrivals need at once on average; never less than the least room fraction
    (`ShortJobs.least_room_fraction`, rounded down)."""
    floor = math.floor(short_jobs.least_room_fraction * gpus)
    used = min(gpus, math.ceil(short_gpus - 1e-9))
    if used > floor:
        return used, f"what short jobs held on average over the window: {short_gpus:.1f}"
    return floor, f"{short_jobs.least_room_fraction:.0%} of the schedulable {GPU}"


def yielded_gpus(workload: Workload, now: float, non_preemptible_priority: int | None,
                 short_jobs: ShortJobs) -> dict[str, int] | None:
    """GPUs per node that an admitted workload gives the short jobs at once, or None if it does
    not yield: it yields if unfunded, or long, resumable, preemptible, past its min runtime and
    on one node."""
    if workload.funded:
        until = workload.protected_until()
        if (until is None or until > now or not workload.resumable or short_jobs.is_short(workload)
                or not workload.preemptible(non_preemptible_priority)):
            return None
    per_node = held_per_node(workload, GPU)
    return per_node if not workload.funded or len(per_node) == 1 else None


class Headroom:
    """The pool's bound for one cycle and what yielding work holds, kept current by the cycle's
    `Statement` (`change`) as it allocates and evicts, simulations included."""

    def __init__(self, state: ClusterState, workloads: Iterable[Workload], now: float,
                 non_preemptible_priority: int | None, short_jobs: ShortJobs,
                 guaranteed: Callable[[Workload], bool] | None = None,
                 short_gpus: float = 0.0) -> None:
        self._state = state
        self.short_jobs = short_jobs
        """Who is a short job, and the room's floor and per-node size."""
        self._guaranteed = guaranteed
        """Whether a start stays within its queues' guarantee, read live as the cycle admits
        and evicts; None where nothing is guaranteed (a caller with no ledger)."""
        self.held = 0
        self._yielding: set[str] = set()
        """Keys of the admitted workloads that yield (`yielded_gpus`): once evicted in the
        cycle, their GPUs leave `held` as they become free (work started in the cycle is
        protected)."""
        self._on_node: dict[str, list[tuple[str, int]]] = {}
        """Per node, the yielding workloads admitted before the cycle and the GPUs each holds
        there. One that has left since is no longer assumed on the node model; unfunded work
        admitted in the cycle is not listed, as it comes after every funded start (step 4)."""
        for workload in workloads:
            if workload.phase is not Phase.ADMITTED:
                continue
            per_node = yielded_gpus(workload, now, non_preemptible_priority, short_jobs)
            if per_node is not None:
                self._yielding.add(workload.key)
                self.held += workload.requests().get(GPU, 0)
                for node, gpus in per_node.items():
                    self._on_node.setdefault(node, []).append((workload.key, gpus))
        self._gpus = state.schedulable_capacity().get(GPU, 0)
        self.needed, self._sized_by = room_needed(self._gpus, short_gpus, short_jobs)
        demand = state.demand(short_jobs.largest_pod)
        self._short_pod: Shape | None = None if demand is None else demand.pod_sets[0][0]
        self._schedulable: set[str] | None = None
        self.exempt: str | None = None
        """The key of the workload a drain is for, set by the cycle once it is chosen."""

    def applies(self, workload: Workload, exempting: bool = True) -> bool:
        """Whether `workload` is held to the headroom at all (to the count: `exempting` the
        drain's target). Flexible work and work within its queues' guarantee are not."""
        return self.needed > 0 and not (exempting and workload.key == self.exempt) and (
            not self.short_jobs.flexible(workload)
            and workload.requests().get(GPU, 0) <= self._gpus - self.needed
            and not (self._guaranteed is not None and self._guaranteed(workload)))

    def pool(self) -> int:
        """GPUs in the pool now: idle, or held by yielding work."""
        return self._state.free_total(GPU) + self.held

    def allows(self, workload: Workload) -> bool:
        """Whether `workload` may start on what is free now (yielding work evicted for it has
        left `held` as its GPUs became free: they were in the pool already)."""
        if not self.applies(workload):
            return True
        return self.pool() - workload.requests().get(GPU, 0) >= self.needed

    def refusal(self, workload: Workload) -> str:
        """Why `allows` said no, in the GPUs the node model counts."""
        idle, need = self._state.free_total(GPU), workload.requests().get(GPU, 0)
        return (f"{idle} {GPU} are idle and {self.held} held by work short jobs may requeue; "
                f"{need} more would leave {max(0, idle + self.held - need)}, fewer than the "
                f"{self.needed} kept for short jobs ({self._sized_by})")

    def takes_nothing(self, workload: Workload, placement: Placement,
                      victims: Iterable[Workload]) -> bool:
        """Whether `workload` at `placement` takes, on every node, no more GPUs than its
        `victims` free there that were not in the pool already (yielding work's were): such a
        swap leaves the pool and every node's room as it found them, even where they were
        already short (a priority swap inside a queue on a full cluster)."""
        freed: dict[str, int] = {}
        for victim in victims:
            if victim.key not in self._yielding:
                for node, gpus in held_per_node(victim, GPU).items():
                    freed[node] = freed.get(node, 0) + gpus
        return all(freed.get(node, 0) >= gpus
                   for node, gpus in _gpus_per_node(workload, placement).items())

    def keeps_room(self, workload: Workload, placement: Placement) -> bool:
        """Whether, with `workload` at `placement` (not yet assumed), some node still has
        `ShortJobs.max_gpus` GPUs idle or held by yielding work. The drain's target is held to it
        too."""
        if self._short_pod is None or not self.applies(workload, exempting=False):
            return True
        return self._room_left(_gpus_per_node(workload, placement))

    def _room_left(self, taken: dict[str, int]) -> bool:
        """Whether a node keeps room for the largest short pod with `taken` GPUs per node
        filled: the node model's slots for that pod (a memoised sum over the domain tree)
        minus those `taken` fills; only if none is left are the nodes holding yielding work
        read."""
        shape = self._short_pod
        assert shape is not None
        state = self._state
        slots = capacity(state.tree.root, shape)
        size = self.short_jobs.max_gpus
        for node, gpus in taken.items():
            free = state.free_of(node, GPU)
            slots -= free // size - max(0, free - gpus) // size
        if slots > 0:
            return True
        if self._schedulable is None:  # once a cycle, and only on a cluster this full
            self._schedulable = {state.names[i] for i in state.tree.leaves}
        for node, holders in self._on_node.items():
            if node not in self._schedulable:
                continue  # cordoned, or gone from the snapshot
            pool = max(0, state.free_of(node, GPU) - taken.get(node, 0)) + sum(
                gpus for key, gpus in holders if state.assumed(key))
            if pool >= size:
                return True
        return False

    def change(self, workload: Workload, sign: int) -> None:
        """`workload` started (1) or stopped (-1)."""
        if not workload.funded or workload.key in self._yielding:
            self.held += sign * workload.requests().get(GPU, 0)


def _gpus_per_node(workload: Workload, placement: Placement) -> dict[str, int]:
    """GPUs `workload` would hold per node at `placement`."""
    taken: dict[str, int] = {}
    for pod_set, counts in zip(workload.pod_sets, placement.node_counts, strict=True):
        gpus = pod_set.requests.get(GPU, 0)
        for node, count in counts.items():
            taken[node] = taken.get(node, 0) + gpus * count
    return taken
