"""CustomResourceDefinitions generated from the pydantic models, so the two cannot drift.

Pydantic emits JSON Schema 2020-12; the API server wants a structural OpenAPI v3.0 schema with
no `$ref`, no `additionalProperties: false` beside `properties`, `nullable` instead of a null
branch and `enum` instead of `const`. `structural_schema` does that translation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from admitter.api import yaml_text
from admitter.api.base import GROUP, VERSION, Resource
from admitter.api.clusterqueue import ClusterQueue
from admitter.api.localqueue import LocalQueue
from admitter.api.topology import Topology
from admitter.api.workercluster import CONDITION_REACHABLE, WorkerCluster
from admitter.api.workload import (
    CONDITION_ADMITTED,
    CONDITION_FINISHED,
    CONDITION_QUOTA_RESERVED,
    Workload,
)

KINDS: tuple[type[Resource], ...] = (ClusterQueue, LocalQueue, Workload, Topology,
                                     WorkerCluster)

_DROPPED_KEYS = {"title", "default", "propertyNames"}

_GPU = r"nvidia\.com/gpu"


def _condition_column(name: str, condition: str, field: str) -> dict[str, Any]:
    """A printer column showing one field of one condition."""
    return {"name": name, "type": "string",
            "jsonPath": f'.status.conditions[?(@.type=="{condition}")].{field}'}


PRINTER_COLUMNS: dict[str, list[dict[str, Any]]] = {
    "ClusterQueue": [
        {"name": "Parent", "type": "string", "jsonPath": ".spec.parent"},
        {"name": "GPU Quota", "type": "string", "jsonPath": f".spec.resources.{_GPU}.quota"},
        {"name": "GPU Allocated", "type": "string", "jsonPath": f".status.allocated.{_GPU}"},
        {"name": "GPU Fair Share", "type": "string", "jsonPath": f".status.fairShare.{_GPU}"},
        {"name": "Pending", "type": "integer", "jsonPath": ".status.pendingWorkloads"},
        {"name": "Admitted", "type": "integer", "jsonPath": ".status.admittedWorkloads"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    "LocalQueue": [
        {"name": "ClusterQueue", "type": "string", "jsonPath": ".spec.clusterQueue"},
        {"name": "Pending", "type": "integer", "jsonPath": ".status.pendingWorkloads"},
        {"name": "Admitted", "type": "integer", "jsonPath": ".status.admittedWorkloads"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    "Workload": [
        {"name": "Queue", "type": "string", "jsonPath": ".spec.queueName"},
        {
            "name": "Admitted By",
            "type": "string",
            "jsonPath": ".status.admission.clusterQueue",
        },
        _condition_column("Admitted", CONDITION_ADMITTED, "status"),
        _condition_column("Finished", CONDITION_FINISHED, "status"),
        _condition_column("Reason", CONDITION_QUOTA_RESERVED, "reason"),
        {"name": "Evictions", "type": "integer", "jsonPath": ".status.evictionCount"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    "Topology": [
        # The API server prints only the first match of a path (`levels[*].nodeLabel` showed
        # the coarsest level alone); the whole list prints as JSON.
        {"name": "Levels", "type": "string", "jsonPath": ".spec.levels"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    "WorkerCluster": [
        _condition_column("Reachable", CONDITION_REACHABLE, "status"),
        _condition_column("Reason", CONDITION_REACHABLE, "reason"),
        {"name": "Nodes", "type": "integer", "jsonPath": ".status.nodes"},
        {"name": "GPUs", "type": "integer", "jsonPath": ".status.gpus"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
}


def structural_schema(kind: type[Resource]) -> dict[str, Any]:
    """The kind's OpenAPI v3 schema as the API server accepts it."""
    raw = kind.model_json_schema(by_alias=True, mode="validation")
    definitions = raw.pop("$defs", {})
    schema = _translate(raw, definitions)
    schema["properties"]["metadata"] = {"type": "object"}
    schema["properties"]["kind"] = {"type": "string", "description": "The kind's name."}
    schema["properties"]["apiVersion"] = {
        "type": "string",
        "description": f"Always {GROUP}/{VERSION}.",
    }
    return schema


def _translate(node: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_translate(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _translate(merged, definitions)
    branches = node.get("anyOf")
    if branches and {"type": "null"} in branches:
        rest = [b for b in branches if b != {"type": "null"}]
        merged = {k: v for k, v in node.items() if k != "anyOf"}
        merged.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
        merged["nullable"] = True
        return _translate(merged, definitions)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "additionalProperties" and value is False:
            continue
        elif key == "properties":
            out[key] = {name: _translate(sub, definitions) for name, sub in value.items()}
        else:
            out[key] = _translate(value, definitions)
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    if out.get("format") == "date-time":
        out["type"] = "string"
    return out


def crd_for(kind: type[Resource]) -> dict[str, Any]:
    """The CustomResourceDefinition manifest of one kind."""
    schema = structural_schema(kind)
    names: dict[str, Any] = {
        "kind": kind.kind_name,
        "listKind": f"{kind.kind_name}List",
        "plural": kind.plural,
        "singular": kind.kind_name.lower(),
    }
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": PRINTER_COLUMNS[kind.kind_name],
    }
    if "status" in schema["properties"]:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": names,
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "versions": [version],
        },
    }


def render_crds() -> dict[str, str]:
    """File name → YAML text for every kind; deterministic byte for byte."""
    header = "# Generated by `admitter crds` from admitter/api; do not edit by hand.\n"
    return {
        f"{GROUP}_{kind.plural}.yaml": header
        + yaml_text.dump(crd_for(kind), sort_keys=False, width=100)
        for kind in KINDS
    }


def write_crds(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_crds().items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written
