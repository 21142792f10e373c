"""The controller's image installs no `sim` extra: nothing it imports may need matplotlib or
numpy, which only `admitter simulate --out` draws plots with."""

import subprocess
import sys

import pytest

PLOTTING = ("matplotlib", "numpy")


@pytest.mark.parametrize("module", ["admitter.cli", "admitter.commands.run",
                                    "admitter.controller.reconciler", "admitter.webhook.server"])
def test_importing_the_controller_imports_no_plotting_library(module):
    probe = (f"import sys, {module}; "
             f"print(sorted(m for m in sys.modules if m.split('.')[0] in {PLOTTING!r}))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "[]"


def test_the_probe_sees_a_plotting_library_when_one_is_imported():
    probe = ("import sys, admitter.sim.plots; "
             f"print(sorted(m for m in sys.modules if m.split('.')[0] in {PLOTTING!r}))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True).stdout
    assert "'matplotlib'" in loaded and "'numpy'" in loaded
