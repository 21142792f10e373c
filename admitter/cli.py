"""`admitter` command line: one subcommand per capability, each a thin edge over the core."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from admitter.api.errors import InputError
from admitter.commands import certs, crds, dashboard, fairshare, run, simulate, webhooks

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="admitter",
        description="GPU-aware admission controller for Kubernetes.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for command in (certs, crds, dashboard, fairshare, run, simulate, webhooks):
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except InputError as error:
        print(error, file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
