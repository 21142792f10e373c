"""Session checks: the tests must exercise the decision core and simulator loop as built.

`make setup` compiles `admitter/core` and the simulator's loop with mypyc (setup.py); the
compiled modules shadow their sources, so a file edited after the build would leave the tests
running the old code.
"""

from pathlib import Path

import pytest
from hypothesis import settings

# No property has a time limit: how long an example takes is for the benchmarks to measure,
# and on a loaded two-core machine hypothesis's default 200 ms deadline fails slow examples at
# random (a timed assertion in disguise). Tests that set their own settings inherit this.
settings.register_profile("untimed", deadline=None)
settings.load_profile("untimed")

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "admitter" / "core"
COMPILED = {CORE: "admitter_core", ROOT / "admitter" / "sim": "admitter_sim"}
"""Compiled folders and the mypyc group library (at the root) that holds their code."""


def _edited_after_build() -> list[str]:
    stale = []
    for folder, group in COMPILED.items():
        built = list(ROOT.glob(f"{group}__mypyc.*.so"))
        if not built:
            continue
        compiled_at = min(library.stat().st_mtime for library in built)
        for source in sorted(folder.rglob("*.py")):  # the cycle's steps are a subpackage
            if (any(source.parent.glob(f"{source.stem}.*.so"))
                    and source.stat().st_mtime > compiled_at):
                stale.append(str(source.relative_to(folder.parent)))
    return stale


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true",
                     help="run the fault soak (tests/integration/test_fault_soak.py) over 20 seeds")
    parser.addoption("--soak-seed", type=int, action="append", default=[],
                     help="run the fault soak with this seed (again for more seeds)")


def pytest_report_header() -> str:
    compiled = any(CORE.glob("*.so"))
    return "admitter core: " + ("compiled with mypyc" if compiled else "pure Python")


def pytest_sessionstart(session: pytest.Session) -> None:
    stale = _edited_after_build()
    if stale:
        pytest.exit(f"admitter changed after it was compiled ({', '.join(stale)}): "
                    "run `make setup` to rebuild it", returncode=4)
