"""`hack/local-cluster up|down|status`: the launcher for humans, state kept in one directory."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from admitter.testing.cluster import RECORD_FILE, LocalCluster
from admitter.testing.nodes import GpuNodeLayout


def main(argv: list[str], state_dir: Path) -> int:
    parser = argparse.ArgumentParser(prog="hack/local-cluster", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start the control plane and leave it running")
    defaults = GpuNodeLayout()
    for name in ("nodes", "gpus_per_node", "nodes_per_rack", "racks_per_block"):
        up.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    commands.add_parser("down", help="stop the processes `up` started")
    commands.add_parser("status", help="show which components run")
    args = parser.parse_args(argv)

    if args.command == "up":
        return _up(state_dir, args)
    if not (state_dir / RECORD_FILE).exists():
        print(f"no cluster recorded in {state_dir}")
        return 0 if args.command == "down" else 1
    cluster = LocalCluster.attach(state_dir)
    if args.command == "down":
        cluster.stop()
        print(f"stopped; logs kept in {cluster.logs_dir}")
        return 0
    running = cluster.running()
    for name, alive in running.items():
        print(f"{name:24} {'running' if alive else 'stopped'}")
    ready = cluster.api().is_ready()
    print(f"{cluster.server} {'ready' if ready else 'not ready'}")
    return 0 if ready and all(running.values()) else 1


def _up(state_dir: Path, args: argparse.Namespace) -> int:
    if (state_dir / RECORD_FILE).exists():
        if any(LocalCluster.attach(state_dir).running().values()):
            print(f"already running (see {state_dir}); run `hack/local-cluster down` first")
            return 1
        shutil.rmtree(state_dir)  # a stopped cluster's leftovers: start from scratch
    layout = GpuNodeLayout(
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        nodes_per_rack=args.nodes_per_rack,
        racks_per_block=args.racks_per_block,
    )
    cluster = LocalCluster.start(state_dir, layout, detach=True)
    print(f"export KUBECONFIG={cluster.kubeconfig_path}")
    print(f"kubectl: {cluster.binaries.kubectl}")
    return 0
