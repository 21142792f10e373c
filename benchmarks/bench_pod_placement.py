"""Per-pod placement side by side: bursts of 8-GPU and 2-GPU Jobs admitted together onto 8
KWOK nodes of 8 GPUs, with `podPlacement: Domain` (kube-scheduler picks each pod's node) and
`podPlacement: Node` (each pod held until admitter names the node its admission counted it
on), round after round in one run, the two settings alternating.

Each round submits `--big` one-pod 8-GPU Jobs and `--small` one-pod 2-GPU Jobs in a shuffled
order (seeded by the round), exactly the cluster's 64 GPUs, into one queue of them all; waits
until every pod is bound or `--settle` seconds passed; and counts the pods kube-scheduler
found no node for (a FailedScheduling event), the Jobs not running at the round's end, and
the GPU-seconds standing free while the burst waited (each Job's GPUs times the wait from
the submission to its pod's bind, or to the round's end).

    .venv/bin/python benchmarks/bench_pod_placement.py --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from common import ROOT, control_plane

sys.path.insert(0, str(ROOT / "tests" / "integration"))

from burst_world import Burst, admitter_running, burst, placement_gate_in_effect, queue

from admitter.api.settings import Settings
from admitter.kube.client import Kube
from admitter.testing import GpuNodeLayout

LAYOUT = GpuNodeLayout(nodes=8, gpus_per_node=8, nodes_per_rack=2, racks_per_block=2)
MODES = ("Domain", "Node")


async def run(kubeconfig: Path, rounds: int, big: int, small: int,
              settle: float) -> dict[str, list[Burst]]:
    api = await Kube.from_kubeconfig(str(kubeconfig))
    found: dict[str, list[Burst]] = {mode: [] for mode in MODES}
    try:
        await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": "burst"}})
        await queue(api, "burst", LAYOUT.nodes * LAYOUT.gpus_per_node)
        for seed in range(rounds):
            for mode in MODES:
                settings = Settings(cycle=1.0, pod_placement=mode)
                with tempfile.TemporaryDirectory() as certs:
                    async with admitter_running(api, kubeconfig, settings, Path(certs)):
                        if mode == "Node":
                            await placement_gate_in_effect(api, "burst")
                        outcome = await burst(api, "burst", big, small, seed, settle)
                found[mode].append(outcome)
                print(f"round {seed} {mode:6}: {outcome.unschedulable:2} of {outcome.pods} "
                      f"pods unschedulable, {outcome.unbound} Jobs not running at the end, "
                      f"{outcome.idle_gpu_seconds:7.0f} GPU-s idle", flush=True)
    finally:
        await api.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--big", type=int, default=4, help="8-GPU Jobs per round")
    parser.add_argument("--small", type=int, default=16, help="2-GPU Jobs per round")
    parser.add_argument("--settle", type=float, default=60.0,
                        help="seconds a round waits for every pod to be bound")
    args = parser.parse_args()
    with control_plane(LAYOUT) as cluster:
        found = asyncio.run(run(cluster.kubeconfig_path, args.rounds, args.big, args.small,
                                args.settle))
    print("\npodPlacement | rounds with a pod unschedulable | pods unschedulable | "
          "Jobs not running at the end | GPU-s idle (total, per round)")
    for mode, outcomes in found.items():
        hit = sum(1 for o in outcomes if o.unschedulable)
        pods = sum(o.pods for o in outcomes)
        idle = sum(o.idle_gpu_seconds for o in outcomes)
        print(f"{mode:12} | {hit} of {len(outcomes)} | "
              f"{sum(o.unschedulable for o in outcomes)} of {pods} | "
              f"{sum(o.unbound for o in outcomes)} | {idle:.0f}, {idle / len(outcomes):.0f}")


if __name__ == "__main__":
    main()
