"""Build hook: the decision core (`admitter/core`) and the simulator's event loop are compiled to
C with mypyc.

Both are typed Python; compiled, the core runs a cycle about twice as fast and the simulator's
own loop (events, usage records, accounting) about a third faster (BENCHMARKS.md), with the
same decisions: the test suite runs on the compiled modules. They are two groups, so the loop
calls `run_cycle` through the module like any caller (the benchmarks wrap it to time the core).
`ADMITTER_PURE_PYTHON=1` at install time skips compiling (to profile with py-spy or
pyinstrument, which cannot see into compiled frames). An editable install puts the compiled
modules beside their sources, where they shadow them: `make setup` rebuilds them when one of
those files changes.
"""

import os
from pathlib import Path

from setuptools import setup

CORE = sorted(str(path) for path in Path("admitter/core").rglob("*.py")
              if path.name != "__init__.py")
SIMULATOR_LOOP = [f"admitter/sim/{name}.py"
                  for name in ("engine", "accounting", "jobs", "workloads")]
"""What runs per simulated moment; reports, plots and checks run once and stay interpreted."""

if os.environ.get("ADMITTER_PURE_PYTHON") == "1":
    setup()
else:
    from mypyc.build import mypycify

    setup(ext_modules=mypycify(CORE, opt_level="3", group_name="admitter_core")
          + mypycify(SIMULATOR_LOOP, opt_level="3", group_name="admitter_sim"))
