"""What each entry point must not pull in, and which of admitter's packages may import which.

The controller's image installs no `sim` extra, so nothing it imports may need matplotlib or
numpy (only `admitter simulate --out` draws plots); the simulator's compiled loop must not
import the command line (rich, argparse)."""

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

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


# ---- The arrows between admitter's packages (docs/architecture.md draws them) -------------

ROOT = Path(__file__).resolve().parents[1]
FOUNDATION = frozenset({"api", "core"})
BELOW_EDGES = FOUNDATION | {"kube", "jobs"}
EDGES = frozenset({"controller", "webhook", "kubectl", "dashboard", "sim"})
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "pki": frozenset(),
    "api": frozenset({"core"}),
    "kube": FOUNDATION,
    "jobs": FOUNDATION | {"kube"},
    "fleet": BELOW_EDGES,
    "controller": BELOW_EDGES | {"fleet"},
    "webhook": BELOW_EDGES,
    "kubectl": BELOW_EDGES,
    "sim": FOUNDATION,
    "dashboard": BELOW_EDGES | {"kubectl.clusters", "kubectl.explain", "kubectl.queues",
                                "kubectl.state", "kubectl.times", "kubectl.top", "sim.engine",
                                "sim.result"},
    "commands": BELOW_EDGES | EDGES | {"pki", "fleet"},
    "cli": frozenset({"api", "commands"}),
    "testing": BELOW_EDGES | EDGES | {"commands", "pki", "fleet"},
}
"""Which of admitter's packages (or top-level modules) each one may import: a package, or one
module of it (`kubectl.state`: that module and nothing else of `kubectl`). The decision core
imports nothing of admitter's; the API models only the core; the Kubernetes edge (`kube`) and
the job kinds (`jobs`) stand below every edge. An edge imports no other edge, but for the
dashboard, which draws what the kubectl plugin reads (its readings, explanations and tables,
not its command line) and what a simulated run produced (`sim.engine.Outcome`,
`sim.result.Result`, nothing else of the simulator). `commands` wires edges into
processes, and `testing` starts them on a local control plane. The simulator knows no
Kubernetes."""


@dataclass(frozen=True)
class Arrow:
    """One import of one admitter package by another, and where it is written: `target` is the
    module imported (`kube.client`), or the package when the import names no module of it."""

    source: str
    target: str
    where: str

    @property
    def target_package(self) -> str:
        return self.target.split(".")[0]


def _inside(module: str, top: str) -> str | None:
    """`admitter.kube.client` → `kube.client`; None outside the package `top`."""
    parts = module.split(".")
    return ".".join(parts[1:]) if parts[0] == top and len(parts) > 1 else None


def _allows(allowed: frozenset[str], target: str) -> bool:
    """Whether an entry of `allowed` is `target` or a package it lies in."""
    return any(target == entry or target.startswith(entry + ".") for entry in allowed)


def arrows(package_root: Path) -> list[Arrow]:
    """Every import, at any depth in a file (a deferred import in a function counts too), from
    one of the package's sub-packages or top-level modules into another."""
    found = []
    top = package_root.name
    for path in sorted(package_root.rglob("*.py")):
        relative = path.relative_to(package_root)
        source = relative.parts[0].removesuffix(".py")
        if source == "__init__":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = ([f"{node.module}.{alias.name}" for alias in node.names]
                           if node.module == top else [node.module])
            else:
                continue
            for module in modules:
                target = _inside(module, top)
                if target is not None:
                    arrow = Arrow(source, target, f"{relative}:{node.lineno}")
                    if arrow.target_package != source:
                        found.append(arrow)
    return found


def forbidden(found: list[Arrow], allowed: dict[str, frozenset[str]]) -> list[str]:
    """The arrows the table does not allow, each with where it is written; a package missing
    from the table may import nothing until its arrows are declared."""
    return [f"{arrow.where}: {arrow.source} → {arrow.target}" for arrow in found
            if not _allows(allowed.get(arrow.source, frozenset()), arrow.target)]


def test_admitters_packages_import_only_along_the_allowed_arrows():
    assert forbidden(arrows(ROOT / "admitter"), ALLOWED) == []


def test_every_package_has_its_arrows_declared():
    packages = {path.name.removesuffix(".py") for path in (ROOT / "admitter").iterdir()
                if (path.is_dir() and (path / "__init__.py").exists())
                or (path.suffix == ".py" and path.name != "__init__.py")}
    assert packages == set(ALLOWED)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checker_finds_an_arrow_from_one_edge_into_another(tmp_path):
    package = _write(tmp_path / "admitter", {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/model.py": "X = 1\n",
        "kube/__init__.py": "",
        "kube/client.py": "from admitter.core.model import X\n",
        "webhook/__init__.py": "",
        "webhook/server.py": "from admitter.kube import client\n",
        "controller/__init__.py": "",
        "controller/reconciler.py": ("import admitter.kube.client\n\n"
                                     "def later():\n"
                                     "    from admitter.webhook.server import client\n"),
        "controller/lookup.py": "from admitter import webhook\n",
    })
    allowed = {"core": frozenset(), "kube": frozenset({"core"}),
               "webhook": frozenset({"core", "kube"}), "controller": frozenset({"core", "kube"})}
    assert forbidden(arrows(package), allowed) == [
        "controller/lookup.py:1: controller → webhook",
        "controller/reconciler.py:4: controller → webhook.server",
    ]
    assert forbidden(arrows(package), {**allowed, "controller": allowed["webhook"] | {"webhook"}}
                     ) == []


def test_the_checker_holds_an_undeclared_package_to_no_arrows(tmp_path):
    package = _write(tmp_path / "admitter", {
        "core/__init__.py": "",
        "fleet/__init__.py": "",
        "fleet/workers.py": "from admitter.core import model\n",
    })
    assert forbidden(arrows(package), {"core": frozenset()}) == [
        "fleet/workers.py:1: fleet → core"]


def test_an_exception_for_one_module_lets_no_other_module_of_its_package_through(tmp_path):
    package = _write(tmp_path / "admitter", {
        "kubectl/__init__.py": "",
        "kubectl/state.py": "X = 1\n",
        "kubectl/main.py": "X = 1\n",
        "dashboard/__init__.py": "",
        "dashboard/live.py": ("from admitter.kubectl.state import X\n"
                              "from admitter.kubectl.main import X as Y\n"
                              "from admitter.kubectl import state\n"),
    })
    allowed = {"kubectl": frozenset(), "dashboard": frozenset({"kubectl.state"})}
    assert forbidden(arrows(package), allowed) == [
        "dashboard/live.py:2: dashboard → kubectl.main",
        "dashboard/live.py:3: dashboard → kubectl",
    ]
    assert forbidden(arrows(package), {**allowed, "dashboard": frozenset({"kubectl"})}) == []
