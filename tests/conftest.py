"""Session checks: the tests must exercise the decision core as built.

`make setup` compiles `admitter/core` with mypyc (setup.py); the compiled modules shadow their
sources, so a core file edited after the build would leave the tests running the old code.
"""

from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "admitter" / "core"


def _edited_after_build() -> list[str]:
    stale = []
    for source in sorted(CORE.glob("*.py")):
        built = list(CORE.glob(f"{source.stem}.*.so"))
        if built and min(b.stat().st_mtime for b in built) < source.stat().st_mtime:
            stale.append(source.name)
    return stale


def pytest_report_header() -> str:
    compiled = any(CORE.glob("*.so"))
    return "admitter core: " + ("compiled with mypyc" if compiled else "pure Python")


def pytest_sessionstart(session: pytest.Session) -> None:
    stale = _edited_after_build()
    if stale:
        pytest.exit(f"admitter/core changed after it was compiled ({', '.join(stale)}): "
                    "run `make setup` to rebuild it", returncode=4)
