"""A digest of every decision the simulator takes on a scenario, to show that a change to the
core's structure changed no decision.

    .venv/bin/python tests/sim/decision_digest.py [SCENARIO ...]   (default: examples/*.yaml)

Prints one line per scenario: the SHA-256 of each workload's runs (start, end, nodes, eviction
reason and preemptor) in submission order, with the run's end and its number of cycles. Run it
before and after a change and compare; a change of the decision rule changes it on purpose.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from admitter.api.scenario_file import load_scenario
from admitter.sim.engine import Outcome, Simulation

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def decisions(outcome: Outcome) -> list[object]:
    """Everything the core decided, in an order that does not depend on dict iteration."""
    runs = [[job.key, job.finished_at, [[stint.start, stint.end, sorted(stint.nodes.items()),
                                        stint.reason, stint.preemptor]
                                       for stint in job.stints]]
            for job in outcome.jobs]
    return [outcome.end, outcome.cycles, outcome.unsubmitted, runs]


def digest(path: Path) -> str:
    outcome = Simulation(load_scenario(path)).run()
    text = json.dumps(decisions(outcome), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def main(paths: list[str]) -> None:
    for path in [Path(p) for p in paths] or sorted(EXAMPLES.glob("*.yaml")):
        print(f"{digest(path)}  {path.name}")


if __name__ == "__main__":
    main(sys.argv[1:])
