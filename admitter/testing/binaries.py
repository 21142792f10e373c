"""Where `hack/build.sh` puts the control-plane binaries.

The versions come from the wrapper modules' go.mod files, the single source of truth, so a version
bump there makes the launcher look for (and the build script produce) a new binary directory.
Kubernetes has one wrapper module per supported minor: `hack/kube/` pins the newest, and the
environment variable `KUBE_MODULE` names another (`KUBE_MODULE=kube-1.34` for `hack/kube-1.34/`);
the build script reads the same variable, so both agree on the version.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

HACK_DIR = Path(__file__).resolve().parents[2] / "hack"

# (wrapper module dir, pinned module path, binary names) per component directory prefix.
_COMPONENTS = {
    "kube": (
        "k8s.io/kubernetes",
        ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"),
    ),
    "etcd": ("go.etcd.io/etcd/server/v3", ("etcd",)),
    "kwok": ("sigs.k8s.io/kwok", ("kwok",)),
}
KUBE_MODULE_VARIABLE = "KUBE_MODULE"
"""Names the Kubernetes wrapper module directory under hack/ (default `kube`, the newest minor)."""


def run_build(script: Path) -> str:
    """Run a hack/ build script (it builds only what is missing, and waits for a build of the
    same binary already under way); what it prints. A failure carries the build's errors."""
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout.strip()


class BinariesMissingError(RuntimeError):
    """The control-plane binaries have not been built yet."""


@dataclass(frozen=True)
class Binaries:
    """Paths of every binary the local control plane runs."""

    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    etcd: Path
    kwok: Path
    kube_version: str

    @classmethod
    def locate(cls, hack_dir: Path = HACK_DIR, kube_module: str | None = None) -> Binaries:
        """Resolve paths as `hack/bin/<component>-<version>/<binary>` (they may not exist yet).

        `kube_module` is the Kubernetes wrapper module directory under `hack_dir`; by default
        `$KUBE_MODULE`, else `kube`."""
        kube_module = kube_module or os.environ.get(KUBE_MODULE_VARIABLE) or "kube"
        module_dirs = {component: hack_dir / component for component in _COMPONENTS}
        module_dirs["kube"] = hack_dir / kube_module
        if not (module_dirs["kube"] / "go.mod").is_file():
            raise BinariesMissingError(
                f"{KUBE_MODULE_VARIABLE}={kube_module!r}: {module_dirs['kube']} holds no go.mod "
                f"(Kubernetes wrapper modules: {', '.join(kube_modules(hack_dir))})"
            )
        paths: dict[str, Path] = {}
        versions: dict[str, str] = {}
        for component, (module, names) in _COMPONENTS.items():
            versions[component] = pinned_version(module_dirs[component] / "go.mod", module)
            for name in names:
                paths[name.replace("-", "_")] = (
                    hack_dir / "bin" / f"{component}-{versions[component]}" / name
                )
        return cls(**paths, kube_version=versions["kube"])

    def all(self) -> list[Path]:
        return [
            self.etcd,
            self.kube_apiserver,
            self.kube_controller_manager,
            self.kube_scheduler,
            self.kwok,
            self.kubectl,
        ]

    def missing_message(self) -> str | None:
        """What to do about missing binaries, or None when all are built."""
        missing = [str(path) for path in self.all() if not path.is_file()]
        if not missing:
            return None
        return (
            "control-plane binaries are missing (run `bash hack/build.sh` first, "
            "a cold build takes a while): " + ", ".join(missing)
        )

    def require(self) -> Binaries:
        """Fail with the fix spelled out when any binary is missing."""
        message = self.missing_message()
        if message is not None:
            raise BinariesMissingError(message)
        return self


def kube_modules(hack_dir: Path = HACK_DIR) -> list[str]:
    """The Kubernetes wrapper module directories under `hack_dir`: `kube` and `kube-<minor>`."""
    found = [*hack_dir.glob("kube/go.mod"), *hack_dir.glob("kube-*/go.mod")]
    return sorted(path.parent.name for path in found)


def pinned_version(go_mod: Path, module: str) -> str:
    """The version `go_mod` requires for `module` (one-line or block `require` form)."""
    match = re.search(
        rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod.read_text(), re.MULTILINE
    )
    if match is None:
        raise BinariesMissingError(f"{go_mod} does not require {module}")
    return match.group(1)
