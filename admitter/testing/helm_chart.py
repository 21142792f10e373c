"""The Helm chart in deploy/helm/admitter, rendered with Helm built from its Go module
(hack/helm/build.sh), for the tests that compare it with deploy/ and install it."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import yaml

from admitter.api import yaml_text
from admitter.api.settings import Settings
from admitter.kube.names import NAMESPACE
from admitter.kube.objects import Obj
from admitter.testing.binaries import run_build

ROOT = Path(__file__).parents[2]
CHART = ROOT / "deploy" / "helm" / "admitter"
BUILD = ROOT / "hack" / "helm" / "build.sh"


def helm() -> Path:
    """The Helm binary, built first if needed (cached under hack/bin)."""
    return Path(run_build(BUILD))


def render(values: Obj | None = None, namespace: str = NAMESPACE, release: str = "admitter",
           kubeconfig: Path | None = None) -> list[Obj]:
    """`helm template` of the chart with its CRDs, with `values` over the defaults; with
    `kubeconfig`, looking up what the cluster holds (as `helm upgrade` does), whoever applied
    it (`--take-ownership`: objects applied with kubectl carry no Helm release labels)."""
    cluster = [] if kubeconfig is None else [
        "--dry-run=server", "--take-ownership", "--kubeconfig", str(kubeconfig)]
    done = subprocess.run(
        [str(helm()), "template", release, str(CHART), "--namespace", namespace,
         "--include-crds", "--values", "-", *cluster],
        input=yaml_text.dump(values or {}), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise ChartError(done.stderr.strip())
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


class ChartError(RuntimeError):
    """Helm refused to render the chart (its message names the value)."""


def comparable(docs: list[Obj]) -> dict[tuple[str, str], Obj]:
    """Objects by kind and name, without what only the chart makes (the CA bundle), with the
    settings as the controller reads them (Helm writes `1.0` as `1` and leaves out nulls)."""
    found = {}
    for doc in copy.deepcopy(docs):
        for hook in doc.get("webhooks", []):
            hook["clientConfig"].pop("caBundle", None)
        if doc["kind"] == "ConfigMap":
            doc["data"] = {name: Settings.model_validate(yaml.safe_load(text))
                           for name, text in doc["data"].items()}
        found[doc["kind"], doc["metadata"]["name"]] = doc
    return found
