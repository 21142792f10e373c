"""What each entry point must not pull in. The controller's image installs no `sim` extra, so
nothing it imports may need matplotlib or numpy (only `admitter simulate --out` draws plots);
the simulator's compiled loop must not import the command line (rich, argparse)."""

import subprocess
import sys

import pytest

PLOTTING = ("matplotlib", "numpy")
COMMAND_LINE = ("admitter.commands", "admitter.cli", "rich", "argparse")


def _loaded(module: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules under `prefixes` that importing `module` in a fresh interpreter loads."""
    probe = (f"import sys, {module}; print('\\n'.join(sorted(m for m in sys.modules "
             f"if any(m == p or m.startswith(p + '.') for p in {prefixes!r}))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    return done.stdout.split()


@pytest.mark.parametrize("module", ["admitter.cli", "admitter.commands.run",
                                    "admitter.controller.reconciler", "admitter.webhook.server"])
def test_importing_the_controller_imports_no_plotting_library(module):
    assert _loaded(module, PLOTTING) == []


def test_the_simulators_loop_imports_no_command_line():
    assert _loaded("admitter.sim.engine", COMMAND_LINE) == []


def test_the_probe_sees_what_a_module_does_import():
    assert {"matplotlib", "numpy"} <= set(_loaded("admitter.sim.plots", PLOTTING))
    assert "admitter.commands.fairshare" in _loaded("admitter.commands.fairshare", COMMAND_LINE)
