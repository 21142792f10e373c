"""What the Containerfile installs, checked without a container engine: its two steps
(hack/image/build-wheels.sh, then hack/image/install.sh) run here on the committed source, and
the entrypoint's `admitter run` from that fresh environment admits a Job on the real control
plane. The environment has no plotting library: the image carries only the controller."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from admitter_world import ControllerProcess, apply_all, jobs, running

from admitter.kube.client import Kube
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration
ROOT = Path(__file__).parents[2]
IMAGE = ROOT / "hack" / "image"


def _step(*command: str | Path) -> None:
    """One build step, with this environment's Python first on PATH (its pip and venv)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    subprocess.run([str(part) for part in command], check=True, timeout=900,
                   env={**os.environ, "PATH": path})


async def test_the_images_install_runs_the_controller(
        api: Kube, namespace: str, kubeconfig: Path, tmp_path: Path) -> None:
    source, wheels, prefix = tmp_path / "src", tmp_path / "wheels", tmp_path / "image"
    source.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    _step("sh", IMAGE / "build-wheels.sh", wheels, source)
    _step("sh", IMAGE / "install.sh", wheels, prefix)
    built = sorted(p.name for p in wheels.glob("*.whl"))
    assert any(name.startswith("admitter-") and "none-any" not in name for name in built), \
        f"admitter's wheel carries its compiled core: {built}"
    assert not [name for name in built if name.startswith(("matplotlib", "numpy"))], built
    plotting = subprocess.run([str(prefix / "bin" / "python"), "-c", "import matplotlib"],
                              capture_output=True)
    assert plotting.returncode != 0, "the image needs no plotting library"

    await apply_all(api, *leaf_queue(f"image-{namespace}", 8, namespace=namespace))
    controller = ControllerProcess(kubeconfig, tmp_path / "controller.log", "--lease-namespace",
                                   namespace, program=(str(prefix / "bin" / "admitter"),))
    try:
        await apply_all(api, JobWrapper("from-image", namespace).runtime("1h").obj())

        async def started() -> bool:
            current = await jobs(api, namespace)
            return "from-image" in current and running(current["from-image"])

        await eventually(started, "the Job admitted by the installed controller", 90)
        assert controller.alive(), controller.log.read_text()[-2000:]
    finally:
        controller.kill()
