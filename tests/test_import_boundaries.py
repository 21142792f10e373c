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
    "dashboard": BELOW_EDGES | {"kubectl", "sim"},
    "commands": BELOW_EDGES | EDGES | {"pki", "fleet"},
    "cli": frozenset({"api", "commands"}),
    "testing": BELOW_EDGES | EDGES | {"commands", "pki", "fleet"},
}
"""Which of admitter's packages (or top-level modules) each one may import. The decision core
imports nothing of admitter's; the API models only the core; the Kubernetes edge (`kube`) and
the job kinds (`jobs`) stand below every edge. An edge imports no other edge, but for the
dashboard, which draws what the kubectl plugin reads (`kubectl.state`, `kubectl.explain`) and
what a simulated run produced (`sim.result`). `commands` wires edges into processes, and
`testing` starts them on a local control plane. The simulator knows no Kubernetes."""


@dataclass(frozen=True)
class Arrow:
    """One import of one admitter package by another, and where it is written."""

    source: str
    target: str
    where: str


def _package_of(module: str, top: str) -> str | None:
    """`admitter.kube.client` → `kube`; None outside the package `top`."""
    parts = module.split(".")
    return parts[1] if parts[0] == top and len(parts) > 1 else None


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
                target = _package_of(module, top)
                if target is not None and target != source:
                    found.append(Arrow(source, target, f"{relative}:{node.lineno}"))
    return found


def forbidden(found: list[Arrow], allowed: dict[str, frozenset[str]]) -> list[str]:
    """The arrows the table does not allow, each with where it is written; a package missing
    from the table may import nothing until its arrows are declared."""
    return [f"{arrow.where}: {arrow.source} → {arrow.target}" for arrow in found
            if arrow.target not in allowed.get(arrow.source, frozenset())]


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
        "controller/reconciler.py:4: controller → webhook",
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
