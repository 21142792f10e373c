"""The rule's policies a platform team sets (`Settings.shortJobs`, `Settings.timeSlicing`): who
counts as a short job and how far apart allocations must rank before GPUs change hands.

Each is one frozen value carried by `CycleSettings`, so every reader (the cycle, the usage
ledger's short GPU time in the controller and the simulator) asks the same object: a rule
exists once. The defaults and why they are what they are: `admitter/api/settings.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from admitter.core.model import GPU, PodSet, Toleration, Workload


@dataclass(frozen=True, slots=True)
class ShortJobs:
    """Short (debug) jobs: funded, protected for at most `max_min_runtime` seconds, one pod of
    at most `max_gpus` GPUs; their room is at least `least_room_fraction` of the schedulable
    GPUs, the part no short-job demand backs weighed against what it idles (`headroom`)."""

    max_min_runtime: float = 900.0
    max_gpus: int = 4
    least_room_fraction: float = 0.02
    largest_pod: Workload = field(init=False, repr=False, compare=False)
    """The pod a node must keep room for: `max_gpus` GPUs, on any schedulable node (it
    tolerates every taint). Made once with the settings, not once a cycle (an interpreted
    dataclass). Hazard: a node tainted for work that short jobs do not tolerate counts too;
    the node model does not know which tolerations future short jobs bring."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "largest_pod", _short_pod(self.max_gpus))

    def room_pod(self, gpus: int) -> Workload:
        """A short pod of `gpus` GPUs that a node keeps room for (`largest_pod` for
        `max_gpus`): the headroom's node room when the whole room is smaller."""
        return self.largest_pod if gpus == self.max_gpus else _short_pod(gpus)

    def is_short(self, workload: Workload) -> bool:
        """Whether `workload` is a debug job (asked on hot paths: no allocation)."""
        return (0 < workload.min_runtime <= self.max_min_runtime
                and workload.requests().get(GPU, 0) <= self.max_gpus
                and sum(p.count for p in workload.pod_sets) == 1)

    def flexible(self, workload: Workload) -> bool:
        """Work that may use the short jobs' room: short or unfunded."""
        return not workload.funded or self.is_short(workload)

    def long_and_lost(self, workload: Workload) -> bool:
        """Long non-resumable work: requeued, it loses hours. Never a short job's victim,
        whatever the rank gap: the short job would run minutes for it."""
        return not workload.resumable and not self.is_short(workload)


def _short_pod(gpus: int) -> Workload:
    """One pod of `gpus` GPUs that tolerates every taint."""
    return Workload("\0short pod", "", (PodSet(
        "short", 1, {GPU: gpus}, (Toleration(operator="Exists"),)),), 0.0)


@dataclass(frozen=True, slots=True)
class TimeSlicing:
    """How far apart (relative, in ratio of use to budget) two allocations must rank before the
    worse one's work past its min runtime is requeued for the better one's: `swap_margin` for
    resumable work, `non_resumable_gap` for work that loses what it did (and short work)."""

    swap_margin: float = 0.05
    non_resumable_gap: float = 9.0
