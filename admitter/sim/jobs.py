"""The life of one submitted workload in the simulator: its runs, its progress, its end.

`progress` is the work done so far in seconds. A resumable workload keeps it when evicted; a
non-resumable one loses it, and the GPU time it had spent is counted as wasted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from admitter.core.model import Workload
from admitter.sim.workloads import Instance


@dataclass(slots=True)
class Stint:
    """One run from admission to eviction (`reason`), finish, or the end of the simulation."""

    start: float
    nodes: dict[str, int]
    end: float | None = None
    reason: str | None = None
    """Why it was evicted; None when it finished or still runs."""
    preemptor: str | None = None


class Job:
    """A submitted instance: pending, running, or finished."""

    __slots__ = ("finished_at", "instance", "progress", "ran", "stints", "workload")

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.progress = 0.0
        self.ran = 0.0
        """Seconds run over all its stints, what its maximum run time counts."""
        self.stints: list[Stint] = []
        self.finished_at: float | None = None
        self.workload = instance.pending
        """The core's view now, rebuilt only when the job starts or stops."""

    @property
    def key(self) -> str:
        return self.instance.key

    @property
    def running(self) -> Stint | None:
        if not self.stints or self.finished_at is not None or self.stints[-1].end is not None:
            return None
        return self.stints[-1]

    @property
    def first_start(self) -> float | None:
        return self.stints[0].start if self.stints else None

    def start(self, now: float, pod_set_nodes: tuple[Mapping[str, int], ...]) -> float:
        """Run from `now` on the given nodes; returns when it will finish if not stopped."""
        self.workload = self._waiting().admitted(
            now, tuple(dict(counts) for counts in pod_set_nodes))
        self.stints.append(Stint(now, dict(self.workload.placement)))
        return now + self.instance.duration - self.progress

    def stop(self, now: float, reason: str, preemptor: str | None) -> float:
        """Evict and requeue; returns the seconds of progress lost (0 when resumable)."""
        stint = self._current()
        stint.end, stint.reason, stint.preemptor = now, reason, preemptor
        ran = now - stint.start
        self.ran += ran
        self.workload = self._waiting()
        if self.instance.pending.resumable:
            self.progress += ran
            return 0.0
        return ran

    def stop_for_good(self, now: float, reason: str) -> None:
        """Stopped and never requeued (it ran its maximum run time): it ends unfinished."""
        self.stop(now, reason, None)
        self.finished_at = now

    def _waiting(self) -> Workload:
        """The core's view while it waits: what it ran before counts toward its maximum."""
        pending = self.instance.pending
        if pending.max_runtime is None or not self.ran:
            return pending
        return replace(pending, ran_before=self.ran)

    def finish(self, now: float) -> None:
        stint = self._current()
        stint.end = now
        self.ran += now - stint.start
        self.finished_at = now

    def _current(self) -> Stint:
        stint = self.running
        if stint is None:
            raise ValueError(f"workload {self.key} is not running")
        return stint
