"""The offline benchmarks still run against today's code, on sizes small enough for the suite.

They are how performance is measured (BENCHMARKS.md), and they call the core and the
simulator the way no test does (wrapping `run_cycle`, replaying snapshots): when those
interfaces change, a benchmark that no longer runs would only be found by the next person who
needs its figure. What they print is not checked beyond their headline; only that they finish.
The control-plane benchmarks need the built cluster and are left to their own runs, as are the
two that simulate and score the Ai2-shaped scenario family (`bench_impact.py`,
`bench_debug_waits.py`): its generator and scorer are kept outside the repository, so that the
rules are judged on scenarios the repository does not hold, and a clone has no copy of them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

RUNS = {
    "bench_simulator.py": (["0.2"], "cycles run"),
    "bench_simulator_floor.py": (["0.4", "--from", "0.2", "--cycles", "20"], "nothing pending"),
    "bench_simulator_repeats.py": (["2.02"], "ms per acting cycle"),
    "bench_cycle.py": (["--quick", "--repeat", "1"], "decision core"),
    "bench_controller_view.py": (["--live", "20", "--finished", "20", "--pending", "20"],
                                 "pending_due"),
    "bench_placement.py": (["100"], "ClusterState build"),
    "bench_controller_memory.py": (["--pending", "40", "--nodes", "8", "--queues", "2"],
                                   "one waiting Job"),
    "bench_fairshare.py": (["2"], "compute_fair_share"),
}
NEEDS_THE_FAMILY = {"bench_impact.py", "bench_debug_waits.py"}


@pytest.mark.parametrize("script", sorted(RUNS))
def test_benchmark_runs(script: str) -> None:
    arguments, headline = RUNS[script]
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), *arguments],
                          capture_output=True, text=True, timeout=300, cwd=BENCHMARKS.parent,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert headline in done.stdout


def test_every_offline_benchmark_is_run_here() -> None:
    """A new offline benchmark joins `RUNS`; one that needs the control plane says so, and one
    that needs the scenario family is listed in `NEEDS_THE_FAMILY`."""
    needs_cluster = {path.name for path in BENCHMARKS.glob("bench_*.py")
                     if "control_plane" in path.read_text()}
    offline = {path.name for path in BENCHMARKS.glob("bench_*.py")} - needs_cluster
    assert offline == set(RUNS) | NEEDS_THE_FAMILY
    assert all("--scenarios" in (BENCHMARKS / name).read_text() for name in NEEDS_THE_FAMILY)
