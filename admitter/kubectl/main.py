"""The `kubectl-admitter` console script: kubectl finds it on PATH as `kubectl admitter`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import ConfigException
from rich.console import Console, Group, RenderableType

from admitter.api import yaml_text
from admitter.kube.client import CONNECTION_ERRORS
from admitter.kubectl import clusters, explain, queues, top
from admitter.kubectl.state import (
    CLUSTER_QUEUES_UNREAD,
    Ambiguous,
    QueueReading,
    connect,
    find_workload,
    read_state,
)

UNREACHABLE: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, ConfigException)
"""No kubeconfig to use, or no API server answering at its address."""


class NotFound(Exception):
    """What the caller named does not exist, or could not be read (exit status 1, as
    kubectl's)."""


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    common.add_argument("-A", "--all-namespaces", action="store_true",
                        help="every namespace: top lists all, explain finds NAME in any")
    common.add_argument("-o", "--output", choices=("json", "yaml", "wide"),
                        help="json or yaml for machines, wide for more columns")
    common.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, "
                        "~/.kube/config)")
    common.add_argument("--context", help="kubeconfig context (default: the current one)")
    parser = argparse.ArgumentParser(
        prog="kubectl admitter",
        description="Why a workload waits, and how each queue's GPU budget is used.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("queues", parents=[common],
                        help="the queue tree: budget, deserved, fair share, GPUs held, "
                             "GPU-hours used of owed over the window, rank")
    explaining = commands.add_parser(
        "explain", parents=[common],
        help="why a Job or Workload waits and what would let it start; for a queue, why it "
             "gets its fair share")
    explaining.add_argument("name", help="a Job, Workload, ClusterQueue or LocalQueue")
    commands.add_parser("top", parents=[common],
                        help="running workloads by GPUs, with min-runtime protection left")
    return parser


async def _collect(args: argparse.Namespace) -> tuple[Any, RenderableType, QueueReading]:
    client, context_namespace = await connect(args.kubeconfig, args.context)
    try:
        namespace = args.namespace or context_namespace
        state = await read_state(client, namespace)
        scope = None if args.all_namespaces else namespace
        wide = args.output == "wide"
        if args.command == "queues":
            if CLUSTER_QUEUES_UNREAD in state.unread:
                raise NotFound(f"Error: {CLUSTER_QUEUES_UNREAD}")
            rows = queues.queue_rows(state)
            view = queues.render_table(rows) if wide else queues.render_tree(rows)
            fleet = clusters.cluster_rows(state)
            if not fleet:
                return {"queues": rows}, view, state
            partial = any(u.what.startswith("Workloads") for u in state.unread)
            return ({"queues": rows, "clusters": fleet},
                    Group(view, clusters.render_clusters(fleet, partial)), state)
        if args.command == "top":
            found = top.top_rows(state, scope)
            return {"running": found}, top.render_top(found, state.now, wide), state
        wl = await find_workload(client, state, scope, args.name)
        if wl is not None:
            explained = await explain.explain_workload(client, state, wl)
            return explained, explain.render(explained, state.now), state
        target = queues.local_queue_target(state, scope, args.name)
        queue = args.name if args.name in state.cluster_queues else target
        if queue in state.cluster_queues:
            why = queues.explain_queue(state, queue)
            return why, queues.render_explanation(why), state
        where = "any namespace" if scope is None else f'namespace "{scope}"'
        unread = "".join(f"; {unread}" for unread in state.unread)
        raise NotFound(f'Error: no Job, Workload, LocalQueue in {where} or ClusterQueue named '
                       f'"{args.name}"{unread}')
    finally:
        await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        data, view, state = asyncio.run(_collect(args))
    except (NotFound, Ambiguous) as error:
        print(error, file=sys.stderr)
        return 1
    except ApiException as error:  # as kubectl: the API server's answer, exit status 1
        print(f"Error from server ({error.status}): {error.reason}", file=sys.stderr)
        return 1
    except UNREACHABLE as error:
        print(f"Unable to connect to the server: {error}", file=sys.stderr)
        return 1
    for unread in state.unread:  # as kubectl's warnings: on stderr, the answer unchanged
        print(f"Warning: {unread}", file=sys.stderr)
    if args.output == "json":
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    elif args.output == "yaml":
        print(yaml_text.dump(data, sort_keys=True), end="")
    else:
        Console(width=max(Console().width, 120) if args.output == "wide" else None).print(view)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
