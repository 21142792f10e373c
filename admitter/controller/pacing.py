"""When a pass runs: on a change that can decide something (debounced), when the core's next
named moment comes, and at least every SWEEP_EVERY.

Hazard: waking on every pod or Job status change (a fill's pods starting) would run a full
pass per change on a busy cluster while deciding nothing; sleeping through a change that
frees quota (a Job finished) would leave GPUs idle for a whole sweep.
"""

from __future__ import annotations

from admitter.controller.plain_pods import wakes_when_idle
from admitter.core.decisions import CycleResult
from admitter.jobs.registry import SUSPENDABLE
from admitter.jobs.workloads import job_ended
from admitter.kube.objects import Obj

DEBOUNCE = 0.2
"""Seconds a pass waits after the first change wakes it: a kubectl apply of many Jobs, or one
pass's own writes coming back as watch events, arrive over a few hundred milliseconds and are
then decided in one pass instead of one pass each. Short beside the admission latency a user
notices (a second), long beside the milliseconds between the events of one burst."""
SWEEP_EVERY = 30.0
"""Seconds between passes that check every Job, not only those whose objects changed (a
write that failed leaves no change behind to be seen)."""


def periodic_wait(result: CycleResult | None, cycle: float, now: float) -> float:
    """Seconds until the next pass if no change wakes the loop first: one cycle while the last
    pass's own decisions may unblock more (or it failed); otherwise nothing can be decided
    anew before the moment the core named (`CycleResult.next_change`), so until then, but at
    least every SWEEP_EVERY for what the core does not name (usage sliding through the
    fair-share window, failed writes the sweep retries, refreshed status)."""
    if result is None or ((result.admissions or result.evictions) and not result.settled):
        return cycle
    wait = SWEEP_EVERY if result.next_change is None else min(SWEEP_EVERY,
                                                                result.next_change - now)
    return max(wait, 0.0)


def matters_when_idle(event: str, obj: Obj) -> bool:
    """With nothing waiting, pods and Job status move constantly (a fill's pods starting)
    but decide nothing; they wait for the periodic pass, except a Job that finished (its
    quota is released at once) and Jobs coming or going."""
    kind = obj.get("kind")
    if kind == "Pod":
        return wakes_when_idle(event, obj)
    if kind in SUSPENDABLE and event == "MODIFIED":
        return job_ended(obj)
    return True
