"""KWOK pod stages: pods become Running when bound, and those annotated with a simulated runtime
Succeed after it. Node stages are left to KWOK's defaults (initialize + lease heartbeat), which it
uses whenever the config file has no node stage.

The templates follow KWOK's own `kustomize/stage/pod/fast` stages (v0.7); only the completion
stage differs: it is driven by `admitter.dev/simulated-runtime` instead of the Job owner.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from admitter.testing.nodes import SIMULATED_RUNTIME_ANNOTATION

_NOT_DELETED = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}

_POD_READY_STATUS = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: PodScheduled
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""

_POD_COMPLETE_STATUS = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  type: Ready
  reason: PodCompleted
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  type: ContainersReady
  reason: PodCompleted
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Succeeded
"""


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
    path.write_text(yaml.safe_dump_all(pod_stages(), sort_keys=False))
    return path
