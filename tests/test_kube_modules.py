"""The Kubernetes wrapper modules under hack/ (one per supported minor) and how the launcher
chooses between them: `KUBE_MODULE` names the module directory, `hack/kube/` by default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from admitter.testing.binaries import HACK_DIR, Binaries, BinariesMissingError, kube_modules

STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[\w.-]+) => \1 (v\S+)$", re.MULTILINE)


def _wrapper(hack_dir: Path, name: str, kube_version: str) -> None:
    (hack_dir / name).mkdir(parents=True)
    (hack_dir / name / "go.mod").write_text(f"require k8s.io/kubernetes {kube_version}\n")


@pytest.fixture
def hack_dir(tmp_path: Path) -> Path:
    _wrapper(tmp_path, "kube", "v1.37.2")
    _wrapper(tmp_path, "kube-1.34", "v1.34.4")
    (tmp_path / "kuberay").mkdir()  # an operator's module is not a Kubernetes module
    (tmp_path / "kuberay" / "go.mod").write_text("require k8s.io/kubernetes v1.33.0\n")
    (tmp_path / "etcd").mkdir()
    (tmp_path / "etcd" / "go.mod").write_text("require go.etcd.io/etcd/server/v3 v3.6.16\n")
    (tmp_path / "kwok").mkdir()
    (tmp_path / "kwok" / "go.mod").write_text("require sigs.k8s.io/kwok v0.7.0\n")
    return tmp_path


def test_the_newest_minor_runs_unless_kube_module_names_another(
    hack_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBE_MODULE", raising=False)
    newest = Binaries.locate(hack_dir)
    assert newest.kube_version == "v1.37.2"
    assert newest.kube_apiserver == hack_dir / "bin" / "kube-v1.37.2" / "kube-apiserver"
    assert newest.etcd == hack_dir / "bin" / "etcd-v3.6.16" / "etcd"

    monkeypatch.setenv("KUBE_MODULE", "kube-1.34")
    oldest = Binaries.locate(hack_dir)
    assert oldest.kube_version == "v1.34.4"
    assert oldest.kubectl == hack_dir / "bin" / "kube-v1.34.4" / "kubectl"
    assert oldest.kwok == newest.kwok


def test_an_unknown_module_is_refused_naming_the_variable_and_the_choices(
    hack_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBE_MODULE", "kube-1.29")
    with pytest.raises(BinariesMissingError) as refused:
        Binaries.locate(hack_dir)
    assert "KUBE_MODULE='kube-1.29'" in str(refused.value)
    assert "kube, kube-1.34" in str(refused.value)
    assert "kuberay" not in str(refused.value)


@pytest.mark.parametrize("module", kube_modules())
def test_every_staging_module_is_pinned_at_the_kubernetes_version(module: str) -> None:
    """k8s.io/kubernetes replaces its staging modules with ./staging/...; the wrapper must pin
    each at the matching v0.<minor>.<patch>, or the build mixes two releases."""
    go_mod = (HACK_DIR / module / "go.mod").read_text()
    kube_version = Binaries.locate(kube_module=module).kube_version
    replaces = dict(STAGING_REPLACE.findall(go_mod))
    assert len(replaces) > 30, f"{module}/go.mod replaces only {sorted(replaces)}"
    staging_version = "v0." + kube_version.removeprefix("v1.")
    assert {name: v for name, v in replaces.items() if v != staging_version} == {}

