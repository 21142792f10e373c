"""Build hook: the decision core (`admitter/core`) is compiled to C with mypyc.

The core is pure, typed, standard-library-only Python; compiled it runs a cycle about twice as
fast (BENCHMARKS.md), with the same decisions: the test suite runs on the compiled modules.
`ADMITTER_PURE_PYTHON=1` at install time skips compiling (to profile the core with py-spy,
which cannot see into compiled frames). An editable install puts the compiled modules beside
their sources, where they shadow them: `make setup` rebuilds them when a core file changes.
"""

import os
from pathlib import Path

from setuptools import setup

CORE = sorted(str(path) for path in Path("admitter/core").glob("*.py")
              if path.name != "__init__.py")

if os.environ.get("ADMITTER_PURE_PYTHON") == "1":
    setup()
else:
    from mypyc.build import mypycify

    setup(ext_modules=mypycify(CORE, opt_level="3", group_name="admitter_core"))
