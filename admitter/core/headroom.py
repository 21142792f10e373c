"""A small headroom for short jobs, which long protected starts respect, as long as it costs
no more than it keeps.

Once work is time-sliced, nearly everything running has started recently and is still inside
its protected min runtime (hours), so a short job would find neither idle GPUs nor any victim.
Hence a long funded start leaves GPUs that a short job could have at once (`yielded_gpus`):
idle, held by unfunded work, or held on one node by resumable long work past its min runtime (a
short job may requeue it, and it resumes without loss). It leaves them in two ways:
- at least `needed` of them in the whole cluster, so that short jobs arriving together find
  room;
- and on at least one node, `node_room` of them: a short job's pod runs on one node, so a pool
  of fragments (2 idle GPUs here, 1 there) holds no 4-GPU debug job however large it is. The
  node's room is the size short jobs ask for, `ShortJobs.max_gpus`, or the whole room if that
  is smaller (a room of one GPU is kept as one GPU, not as half a node). Whether a start keeps
  such a node depends on where it lands, so this is checked on its placement, reading per-node
  free GPUs from the node model.
A reserve costs no more than it keeps (`refusal`). Room GPUs that short-job demand backs
(`backed`, `room_needed`: all of a room their average sizes; of a room the floor sizes, the
whole GPUs they held on average), and the one node's room wherever any GPU is backed, are kept
from every long start: short jobs keep arriving and use them, and a start that took them would
hold them for its protected hours, while the long start that wanted them waits only for the
next GPUs to free. The rest of the room (the floor, `least_room_fraction`, where no demand
fills it) stands idle unless used, so it is weighed,
once every funded workload has had its turn (`weighing`: what is idle then would otherwise
stand idle) and for the drain's target (its held nodes stand idle while it waits): a start
that takes only such GPUs waits only if the room GPUs it would take (`kept`: what the count
would fall short by, or the last node's room) are at least the GPUs it would use beyond them
(`idled`), and never on a node where nothing runs (refused there, it would leave the whole node
idle). So a one-GPU room never keeps seven GPUs idle beside it, and the floor lives on nodes
already partly in use, where a short job's pod fits beside long work and node-sized work cannot
go anyway.
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
the pool. It must still keep the one node where demand backs it: some gang is starving nearly
all the time on a cluster with 2-3x demand, so an exemption from both would leave short jobs no
room whenever drains run (drained gangs would take the last idle GPUs of a small cluster).
A preemption search (`preemption`) sizes its plans to leave the whole room and weighs the
placement it finds the same way: a drained gang whose held nodes stand idle while it waits for
the last node's room is the case the weighing is for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from admitter.core.eviction import Standing, kind_of, may_evict
from admitter.core.fit import Shape, capacity
from admitter.core.model import GPU, Phase, Workload, held_per_node
from admitter.core.nodes import ClusterState
from admitter.core.placement import Placement
from admitter.core.policy import ShortJobs
from admitter.core.room import Search


def room_needed(gpus: int, short_gpus: float, short_jobs: ShortJobs) -> tuple[int, int, str]:
    """How many of `gpus` schedulable GPUs the pool keeps, how many of them short-job demand
    backs, and why: what short jobs held on average over the window (`short_gpus`, rounded up),
    as by Little's law that is how many GPUs their arrivals need at once on average; never less
    than the least room fraction (`ShortJobs.least_room_fraction`, rounded down). A room their
    average sizes is backed whole: short jobs use it. Of a room the floor sizes, only the whole
    GPUs short jobs held on average (rounded down) are: the rest of the floor is kept for
    demand that has not shown up, and stands idle meanwhile."""
    floor = math.floor(short_jobs.least_room_fraction * gpus)
    used = max(0, min(gpus, math.ceil(short_gpus - 1e-9)))
    if used > floor:
        return used, used, f"what short jobs held on average over the window: {short_gpus:.1f}"
    backed = max(0, min(floor, math.floor(short_gpus + 1e-9)))
    return floor, backed, f"{short_jobs.least_room_fraction:.0%} of the schedulable {GPU}"


def yielded_gpus(workload: Workload, now: float, non_preemptible_priority: int | None,
                 short_jobs: ShortJobs) -> dict[str, int] | None:
    """GPUs per node that an admitted workload gives the short jobs at once, or None if it does
    not yield: what a short job may take from any allocation (`eviction.may_evict`: unfunded
    work, or long resumable preemptible work on one node), once past its min runtime."""
    kind = kind_of(workload, short_jobs, non_preemptible_priority)
    if not may_evict(kind, Standing.OTHER_QUEUE, True, Search.RANKED):
        return None
    until = workload.protected_until()
    if until is not None and until > now:
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
        self.needed, self.backed, self._sized_by = room_needed(self._gpus, short_gpus,
                                                               short_jobs)
        self.node_room = min(short_jobs.max_gpus, self.needed)
        """GPUs one node keeps for a short pod: the size short jobs ask for, or the whole room
        if that is smaller."""
        demand = state.demand(short_jobs.room_pod(self.node_room)) if self.node_room else None
        self._short_pod: Shape | None = None if demand is None else demand.pod_sets[0][0]
        self._schedulable: set[str] | None = None
        self.exempt: str | None = None
        """The key of the workload a drain is for, set by the cycle once it is chosen."""
        self.weighing = False
        """Whether every start's refusal weighs what the room keeps against what it idles
        (`refusal`), set by the cycle for its last funded pass, when what is still idle would
        otherwise stand idle; before it, any GPU taken from the room refuses a start but the
        drain's target's, whose held nodes stand idle while it waits."""

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

    def count_refusal(self, workload: Workload) -> str | None:
        """Why `workload` waits whatever its placement, or None: before the last pass, a start
        that would leave the pool short of the count (a cheap answer, read before a placement
        is searched)."""
        if self.weighing or workload.key == self.exempt or self.needed <= 0:
            return None
        need = workload.requests().get(GPU, 0)
        short = min(need, max(0, self.needed - (self.pool() - need)))
        # The count first: it is arithmetic, and whether the room applies asks the ledger.
        if not short or not self.applies(workload):
            return None
        return self._count_message(need, short, need - short)

    def refusal(self, workload: Workload, placement: Placement) -> str | None:
        """None if `workload` may start at `placement` on GPUs idle now, else why it waits,
        in the GPUs the node model counts. A room GPU that demand backs refuses it; before the
        last pass (`weighing`) any room GPU does; then, and for the drain's target, a start
        taking only room GPUs no demand backs waits only if it would take at least as many of
        them (`kept`) as it would use beyond them (`idled`), and never on a node where nothing
        runs (module docstring)."""
        return self._weigh(workload, _gpus_per_node(workload, placement), emptied=False)

    def refuses_on(self, workload: Workload, nodes: list[str]) -> bool:
        """Whether the room would refuse the drain's target on `nodes` once they are emptied
        for it (its GPUs spread over them in order, as `reservation` picks them): held for a
        gang that could not start there, they would stand idle for nothing."""
        need, taken = workload.requests().get(GPU, 0), {}
        for node in nodes:
            gpus = min(need, self._state.offered(node, GPU))
            taken[node], need = gpus, need - gpus
        return self._weigh(workload, taken, emptied=True) is not None

    def _weigh(self, workload: Workload, taken: dict[str, int], emptied: bool) -> str | None:
        """`refusal` for a start taking `taken` GPUs per node; `emptied`: on nodes the drain
        empties (they are idle once it starts)."""
        need = workload.requests().get(GPU, 0)
        pool = self.pool()
        short = min(need, max(0, self.needed - (pool - need))) if self.applies(workload) else 0
        lone = (self._short_pod is not None and self.applies(workload, exempting=False)
                and not self._room_left(taken))
        kept = max(short, self.node_room if lone else 0)
        if kept == 0:
            return None
        idled = max(0, need - kept)
        if (self.weighing or workload.key == self.exempt) and not (
                (short and pool - need < self.backed) or (lone and self.backed > 0)):
            # It takes only room GPUs no demand backs: kept, they would stand idle too (a
            # node's room is backed by any whole GPU of short work: one runs most of the time).
            worth = 0 if emptied or self._on_idle_node(taken) else kept
            if idled > worth or worth == 0:
                return None  # the room costs more than it keeps: given up to this start
        if short >= (self.node_room if lone else 0):
            return self._count_message(need, short, idled)
        return (f"starting here would leave no node with {self.node_room} {GPU} idle or held "
                f"by work short jobs may requeue (one node keeps a short pod's room)"
                f"{_beyond(idled)}")

    def _count_message(self, need: int, short: int, idled: int) -> str:
        """Why a start of `need` GPUs that takes `short` of the room's waits."""
        idle = self._state.free_total(GPU)
        return (f"{idle} {GPU} are idle and {self.held} held by work short jobs may requeue; "
                f"{need} more would leave {self.pool() - need}, fewer than the {self.needed} "
                f"kept for short jobs ({self._sized_by}){_beyond(idled)}")

    def _on_idle_node(self, taken: dict[str, int]) -> bool:
        """Whether a start taking `taken` GPUs per node lands on a node where nothing runs:
        refused, it would leave that whole node idle."""
        state = self._state
        return any(gpus and state.free_of(node, GPU) == state.offered(node, GPU)
                   for node, gpus in taken.items())

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

    def _room_left(self, taken: dict[str, int]) -> bool:
        """Whether a node keeps room for a short pod of `node_room` GPUs with `taken` GPUs per node
        filled: the node model's slots for that pod (a memoised sum over the domain tree)
        minus those `taken` fills; only if none is left are the nodes holding yielding work
        read."""
        shape = self._short_pod
        assert shape is not None
        state = self._state
        slots = capacity(state.tree.root, shape)
        size = self.node_room
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
            pool = max(0, state.free_of(node, GPU) - taken.get(node, 0) + sum(
                gpus for key, gpus in holders if state.assumed(key)))
            if pool >= size:
                return True
        return False

    def change(self, workload: Workload, sign: int) -> None:
        """`workload` started (1) or stopped (-1)."""
        if not workload.funded or workload.key in self._yielding:
            self.held += sign * workload.requests().get(GPU, 0)


def _beyond(idled: int) -> str:
    """What keeping the room idles beside it, as a refusal says it."""
    return (f"; keeping them idles {idled} {GPU} beyond them" if idled
            else "; it would take only the room's GPUs")


def _gpus_per_node(workload: Workload, placement: Placement) -> dict[str, int]:
    """GPUs `workload` would hold per node at `placement`."""
    taken: dict[str, int] = {}
    for pod_set, counts in zip(workload.pod_sets, placement.node_counts, strict=True):
        gpus = pod_set.requests.get(GPU, 0)
        for node, count in counts.items():
            taken[node] = taken.get(node, 0) + gpus * count
    return taken
