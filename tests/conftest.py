"""Session checks: the tests must exercise the decision core and simulator loop as built.

`make setup` compiles `admitter/core` and the simulator's loop with mypyc (setup.py); the
compiled modules shadow their sources, so a file edited after the build would leave the tests
running the old code.
"""

from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "admitter"
CORE = PACKAGE / "core"
COMPILED = (CORE, PACKAGE / "sim")


def _edited_after_build() -> list[str]:
    stale = []
    for folder in COMPILED:
        for source in sorted(folder.glob("*.py")):
            built = list(folder.glob(f"{source.stem}.*.so"))
            if built and min(b.stat().st_mtime for b in built) < source.stat().st_mtime:
                stale.append(f"{folder.name}/{source.name}")
    return stale


def pytest_report_header() -> str:
    compiled = any(CORE.glob("*.so"))
    return "admitter core: " + ("compiled with mypyc" if compiled else "pure Python")


def pytest_sessionstart(session: pytest.Session) -> None:
    stale = _edited_after_build()
    if stale:
        pytest.exit(f"admitter changed after it was compiled ({', '.join(stale)}): "
                    "run `make setup` to rebuild it", returncode=4)
