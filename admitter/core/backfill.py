"""Backfill on the capacity a drain holds for a starving gang (EASY backfill, as HPC schedulers
do it): while the gang waits for protected occupants, the held GPUs would stand idle for hours.
A long funded workload may start on them if it cannot delay the gang: resumable and taken by
the drain (`eviction.EvictionRule.drain_takes`), with its protected min runtime over by
`start_time`, the earliest moment the gang could start anyway. At that moment the drain takes
it like any other occupant past its min runtime, and no progress is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter

from admitter.core.eviction import swappable
from admitter.core.model import GPU, Workload, held_per_node
from admitter.core.nodes import ClusterState


def start_time(state: ClusterState, chosen: list[str], gang: Workload,
               running: Iterable[Workload], takes: Callable[[Workload], bool],
               now: float) -> float | None:
    """The earliest moment at which the GPUs free on `chosen` (the hold not assumed), plus those
    of the occupants the drain takes (unfunded work at once, funded work it `takes` once its
    protection ends), could hold `gang`; None if they never could. GPUs alone and per node: a
    necessary condition, so the gang cannot start earlier on what the drain takes.
    Hazard: an occupant the drain does not take (one it only waits for, short or of an equal
    rank) may finish earlier than anyone can know; the gang could then have started earlier,
    and backfilled work makes it wait, but never past this moment."""
    on = set(chosen)
    available = {name: state.free_of(name, GPU) for name in chosen}
    leaving: list[tuple[float, str, dict[str, int]]] = []
    for workload in running:
        held = {node: gpus for node, gpus in held_per_node(workload, GPU).items() if node in on}
        if not held:
            continue
        until = workload.protected_until()
        if not workload.funded:
            leaving.append((now, workload.key, held))
        elif until is not None and takes(workload):
            leaving.append((max(now, until), workload.key, held))
    leaving.sort(key=itemgetter(0, 1))
    moment, index = now, 0
    while True:
        while index < len(leaving) and leaving[index][0] <= moment:
            for node, gpus in leaving[index][2].items():
                available[node] += gpus
            index += 1
        if _could_hold(available, gang):
            return moment
        if index == len(leaving):
            return None
        moment = leaving[index][0]


def _could_hold(available: dict[str, int], gang: Workload) -> bool:
    """Enough GPUs in all, and for each pod set enough on whole nodes (pod sets counted apart:
    only what is necessary)."""
    if sum(available.values()) < gang.requests().get(GPU, 0):
        return False
    for pod_set in gang.pod_sets:
        per_pod = pod_set.requests.get(GPU, 0)
        if per_pod > 0 and sum(gpus // per_pod for gpus in available.values()) < pod_set.count:
            return False
    return True


class Backfill:
    """What may start on the capacity held for `gang` on `chosen` nodes: see `may_take`.

    Hazards (each makes the gang start later than without backfill, so each is excluded):
    - non-resumable work would lose its progress when the drain takes it (and the drain does
      not take it: `takes` wants resumable work), so it is never backfilled;
    - work whose min runtime ends after `start_at` would still be protected when the gang could
      start: a drain never cuts a protection, so the gang would wait for it;
    - work the drain does not take (a better-ranked allocation, an equal priority in the
      gang's queue, non-preemptible) would hold the nodes for as long as it runs;
    - the drain's choice must not move: backfilled GPUs are no longer free, and another domain
      could then look cheaper to empty, the held capacity be released to long work and the drain
      start over. The cycle admits a backfill only if `choose` still picks the same nodes with
      it running (`steps.held_capacity.keeps_choice`).
    Short jobs are served before the hold (they see all of it) and unfunded work after it (the
    gang evicts it at once): neither is backfill.
    """

    def __init__(self, gang: Workload, chosen: list[str], start_at: float | None,
                 takes: Callable[[Workload], bool], waits_for: Callable[[Workload], bool],
                 kind: Callable[[Workload], int]) -> None:
        self.gang = gang
        self.chosen = chosen
        self.start_at = start_at
        # What the drain takes and waits for besides (`reservation.drainable_gpus`): what
        # `choose` reads.
        self.takes = takes
        self.waits_for = waits_for
        self._kind = kind

    def may_take(self, workload: Workload, now: float) -> bool:
        """Swappable work (long, funded, resumable: `eviction.swappable` of its `kind`) that
        the drain takes, protected no later than the gang could start anyway."""
        return (self.start_at is not None and swappable(self._kind(workload))
                and now + workload.min_runtime <= self.start_at and self.takes(workload))
