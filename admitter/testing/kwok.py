"""KWOK pod stages: pods become Running when bound, and those annotated with a simulated runtime
Succeed after it. Node stages are left to KWOK's defaults (initialize + status heartbeat), which
it uses whenever the config file has no node stage; what keeps the nodes Ready is the Lease KWOK
renews for each of them (`cluster.NODE_LEASE_SECONDS`).

The templates follow KWOK's own `kustomize/stage/pod/fast` stages (v0.7); only the completion
stage differs: it is driven by `admitter.dev/simulated-runtime` instead of the Job owner.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from admitter.api import yaml_text
from admitter.testing.nodes import SIMULATED_RUNTIME_ANNOTATION

_NOT_DELETED = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}

_NOW = "{{ $now | Quote }}"
"""The status templates are Go templates (KWOK renders them), YAML once rendered; every
timestamp is the stage's moment."""


def _conditions(status: str, types: tuple[str, ...], reason: str | None = None) -> str:
    """Pod conditions of the given `types`, all with one status."""
    lines = ["conditions:"]
    for kind in types:
        lines += [f"- lastTransitionTime: {_NOW}", f'  status: "{status}"', f"  type: {kind}"]
        lines += [f"  reason: {reason}"] if reason else []
    return "\n".join(lines) + "\n"


def _containers(key: str, of: str, ready: bool, started: bool | None, state: str) -> str:
    """One status per container of the pod's `of` list (containers or initContainers)."""
    lines = [f"{key}:", f"{{{{ range .spec.{of} }}}}", "- image: {{ .image | Quote }}",
             "  name: {{ .name | Quote }}", f"  ready: {str(ready).lower()}", "  restartCount: 0"]
    lines += [] if started is None else [f"  started: {str(started).lower()}"]
    return "\n".join([*lines, "  state:", state, "{{ end }}"]) + "\n"


_RUNNING = f"    running:\n      startedAt: {_NOW}"
_COMPLETED = (f"    terminated:\n      exitCode: 0\n      finishedAt: {_NOW}\n"
              f"      reason: Completed\n      startedAt: {_NOW}")

_POD_READY_STATUS = (
    "{{ $now := Now }}\n"
    + _conditions("True", ("Initialized", "Ready", "ContainersReady", "PodScheduled"))
    + _containers("containerStatuses", "containers", True, True, _RUNNING)
    + _containers("initContainerStatuses", "initContainers", True, None, _COMPLETED)
    + "hostIP: {{ NodeIPWith .spec.nodeName | Quote }}\n"
    "podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid \"\" ) "
    "( or .metadata.name \"\" ) ( or .metadata.namespace \"\" ) | Quote }}\n"
    f"phase: Running\nstartTime: {_NOW}\n"
)

_POD_COMPLETE_STATUS = (
    "{{ $now := Now }}\n"
    + _conditions("False", ("Ready", "ContainersReady"), reason="PodCompleted")
    + _containers("containerStatuses", "containers", False, False, _COMPLETED)
    + "phase: Succeeded\n"
)


def _stage(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {"resourceRef": {"apiGroup": "v1", "kind": "Pod"}, **spec},
    }


def pod_stages() -> list[dict[str, Any]]:
    """pod-ready, pod-complete (after the simulated runtime) and pod-delete."""
    runtime_key = f'.metadata.annotations["{SIMULATED_RUNTIME_ANNOTATION}"]'
    return [
        _stage(
            "pod-ready",
            {
                "selector": {
                    "matchExpressions": [
                        _NOT_DELETED,
                        {"key": ".status.podIP", "operator": "DoesNotExist"},
                    ]
                },
                "next": {"statusTemplate": _POD_READY_STATUS},
            },
        ),
        _stage(
            "pod-complete",
            {
                "selector": {
                    "matchExpressions": [
                        _NOT_DELETED,
                        {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                        {"key": runtime_key, "operator": "Exists"},
                    ]
                },
                "delay": {"durationFrom": {"expressionFrom": runtime_key}},
                "next": {"statusTemplate": _POD_COMPLETE_STATUS},
            },
        ),
        _stage(
            "pod-delete",
            {
                "selector": {
                    "matchExpressions": [
                        {"key": ".metadata.deletionTimestamp", "operator": "Exists"}
                    ]
                },
                "next": {"finalizers": {"empty": True}, "delete": True},
            },
        ),
    ]


def write_config(path: Path) -> Path:
    """Write the stages as a multi-document KWOK `--config` file."""
    path.write_text(yaml_text.dump_all(pod_stages(), sort_keys=False))
    return path
