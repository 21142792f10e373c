"""Job operators built from their Go modules (hack/<name>/build.sh) and run against a local
control plane, for the tests and the demo that run their kinds. What differs per operator is
data (`Operator`); each runner adds only its own flags and webhooks."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from admitter.testing.binaries import run_build
from admitter.testing.cluster import LocalCluster
from admitter.testing.waiting import wait_for

ROOT = Path(__file__).parents[2]


@dataclass(frozen=True)
class Operator:
    """An operator whose wrapper module is hack/<name>/go.mod and whose manager
    hack/<name>/build.sh builds into hack/bin/<name>-<version>/manager."""

    name: str
    module: str
    """The Go module pinned in the wrapper's go.mod (its version names the binary)."""
    crd_paths: tuple[str, ...]
    """CRD manifests (files or directories) inside the module, applied before the manager
    starts."""
    crds: tuple[str, ...]
    """The CRDs (`<plural>.<group>`) waited for until Established."""

    def build(self) -> Path:
        """Build the manager if needed (cached); the module's directory in Go's cache."""
        return Path(run_build(ROOT / "hack" / self.name / "build.sh"))

    def manager_path(self) -> Path:
        go_mod = (ROOT / "hack" / self.name / "go.mod").read_text().splitlines()
        version = next(line.split()[1] for line in go_mod
                       if line.strip().startswith(f"{self.module} "))
        return ROOT / "hack" / "bin" / f"{self.name}-{version}" / "manager"

    def install(self, cluster: LocalCluster) -> Path:
        """Build it and apply its CRDs; the module's directory."""
        module = self.build()
        for crd_path in self.crd_paths:
            cluster.kubectl("apply", "--server-side", "-f", str(module / crd_path))
        for crd in self.crds:
            cluster.wait_established(crd, 30.0)
        return module


@contextmanager
def running_manager(operator: Operator, cluster: LocalCluster, args: Sequence[str],
                    work_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The operator's manager against `cluster` until the block ends; its log in `work_dir`."""
    work_dir.mkdir(parents=True, exist_ok=True)
    log = (work_dir / f"{operator.name}-manager.log").open("wb")
    process = subprocess.Popen(
        [str(operator.manager_path()), f"--kubeconfig={cluster.kubeconfig_path}", *args],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def serving(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def still_running(process: subprocess.Popen[bytes], what: str) -> Callable[[], None]:
    """A `wait_for` poll hook that fails at once if the manager exited."""

    def check() -> None:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}; see its log")

    return check


def wait_serving(process: subprocess.Popen[bytes], port: int, what: str) -> None:
    """Wait until the manager listens on `port`."""
    wait_for(lambda: serving(port), 60.0, what, on_poll=still_running(process, what))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
