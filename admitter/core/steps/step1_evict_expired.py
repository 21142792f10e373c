"""Step 1: evictions that depend on no one pending, first, so every later step sees what they
free: work that ran its maximum run time (stopped for good), gangs whose pods never became
ready in time, and work on cordoned nodes once past its min runtime (Ai2's automatic drain).
Each that is not due yet names its moment (`CycleState.until`).
"""

from __future__ import annotations

from admitter.core.cycle_state import CycleState
from admitter.core.decisions import EvictionReason
from admitter.core.moments import span


def evict_expired(cycle: CycleState) -> None:
    timeout = cycle.snapshot.settings.pods_ready_timeout
    now = cycle.now
    cordoned_nodes = {name for name, node in cycle.nodes.items() if node.unschedulable}
    for workload in list(cycle.running.values()):
        runs_out = workload.runs_out_at()
        if runs_out is not None:
            if runs_out <= now:
                assert workload.max_runtime is not None
                cycle.evict(workload, EvictionReason.MAX_RUNTIME_EXCEEDED,
                            f"ran {span(workload.max_runtime)}, its maximum run time")
                continue
            cycle.until(runs_out)
        deadline = workload.pods_ready_deadline(timeout, now)
        if deadline is not None:
            if deadline <= now:
                cycle.evict(workload, EvictionReason.PODS_READY_TIMEOUT,
                            f"pods not all running {span(timeout)} after admission")
                continue
            cycle.until(deadline)
        if not cordoned_nodes:
            continue
        cordoned = sorted(cordoned_nodes.intersection(workload.placement))
        until = workload.protected_until()
        if cordoned and (until is None or until <= now):
            cycle.evict(workload, EvictionReason.DRAINED,
                        f"node {cordoned[0]} is cordoned; min runtime is over")
        elif cordoned:
            cycle.until(until)
