"""`admitter` command line: one subcommand per capability, each a thin edge over the core."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from admitter.api.errors import InputError

Handler = Callable[[argparse.Namespace], int]


def _crds(args: argparse.Namespace) -> int:
    from admitter.api.crds import render_crds, write_crds

    directory = Path(args.out)
    if args.check:
        stale = [
            name
            for name, text in render_crds().items()
            if not (directory / name).exists() or (directory / name).read_text() != text
        ]
        if stale:
            print(f"stale in {directory}: {', '.join(stale)}; run `admitter crds`", file=sys.stderr)
            return 1
        print(f"{directory} is up to date")
        return 0
    for path in write_crds(directory):
        print(path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="admitter",
        description="GPU-aware admission controller for Kubernetes.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    crds = commands.add_parser("crds", help="write the CustomResourceDefinitions from the API")
    crds.add_argument("--out", default="crds", help="directory (default: crds)")
    crds.add_argument("--check", action="store_true", help="fail if the directory is stale")
    crds.set_defaults(handler=_crds)
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
