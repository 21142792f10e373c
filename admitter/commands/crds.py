"""`admitter crds`: write (or check) the CustomResourceDefinitions generated from the API."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from admitter.api.crds import render_crds, write_crds


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("crds", help="write the CustomResourceDefinitions from the API")
    parser.add_argument("--out", default="crds", help="directory (default: crds)")
    parser.add_argument("--check", action="store_true", help="fail if the directory is stale")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
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
