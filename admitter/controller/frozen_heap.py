"""The decision cycle runs with the controller's long-lived heap frozen.

A cycle at scale makes tens of thousands of objects, enough to start a full pass of Python's
cyclic garbage collector, which walks every object alive: the snapshot and the informer caches,
about half the cycle's CPU at 10k pending workloads (BENCHMARKS.md, one cycle). `gc.freeze()`
moves every object alive into a generation no pass walks; the cycle's own objects are still
collected as they age. The simulator instead pauses the collector for a whole run (a run owns its
process, and reference counting frees what it makes); a controller runs for months, so the
collector stays on and only the heap it would walk for nothing is set aside, one cycle at a
time.

Hazards:
- Frozen objects are never collected until `gc.unfreeze()`. Freezing every cycle without it
  would keep forever whatever garbage in reference cycles each freeze caught (an exception and
  its traceback's frames, a finished task), so the heap thaws when the cycle ends, raised or
  not. Thawed objects join the oldest generation, and the next full pass frees the garbage
  among them. The young generations are not collected before freezing: their garbage only
  waits for that pass, and collecting them would cost the cycle.
- The switch is process-wide, and the event loop keeps running coroutines while the cycle runs
  in a worker thread: what they make meanwhile is young and collected as usual, what they drop
  from the frozen heap (a cached object a watch event replaced) waits for the thaw.
- After the thaw the collector takes the long-lived heap for what its last pass during the
  cycle saw (the cycle's own objects), so a full pass over all of it comes soon after, on
  whichever thread allocates then (the event loop, mostly). Building the next snapshot makes
  one anyway; the passes the cycle made are saved (`benchmarks/bench_cycle.py --passes`).
- Thawing thaws everything, also what another part of the process froze on purpose (a server
  freezing its imports before forking): when the heap is already frozen as a cycle starts, the
  cycle runs as is.
- Overlapping cycles (two controllers in one process) would thaw each other's heap mid-cycle:
  the first to start freezes, the last to end thaws.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import TypeVar

_Snapshot = TypeVar("_Snapshot")
_Result = TypeVar("_Result")

_lock = threading.Lock()
_cycles = 0
"""Cycles running on the heap this module froze."""


def decide_frozen(decide: Callable[[_Snapshot], _Result], snapshot: _Snapshot) -> _Result:
    """`decide(snapshot)` with every object alive before it frozen."""
    if not _freeze():
        return decide(snapshot)
    try:
        return decide(snapshot)
    finally:
        _thaw()


def _freeze() -> bool:
    """Freeze the heap, or join the cycles that did; False if something else froze it."""
    global _cycles
    with _lock:
        if _cycles == 0:
            if gc.get_freeze_count():
                return False
            gc.freeze()
        _cycles += 1
        return True


def _thaw() -> None:
    global _cycles
    with _lock:
        _cycles -= 1
        if _cycles == 0:
            gc.unfreeze()


def one_at_a_time(decide: Callable[[_Snapshot], _Result]) -> Callable[[_Snapshot], _Result]:
    """`decide` behind a lock of its own. Hazard: a pass cancelled with its lease leaves its
    cycle running in the worker thread, and a core that keeps state between passes
    (`IncrementalCore`) must not be synced by the next leader's pass meanwhile."""
    alone = threading.Lock()

    def locked(snapshot: _Snapshot) -> _Result:
        with alone:
            return decide(snapshot)

    return locked
