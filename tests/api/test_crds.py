"""The CRDs in crds/ are exactly what the models generate, and are structural."""

from pathlib import Path

import yaml

from admitter.api.crds import KINDS, render_crds, structural_schema
from admitter.cli import main

CRDS = Path(__file__).parents[2] / "crds"


def test_crds_directory_matches_the_models_byte_for_byte():
    rendered = render_crds()
    on_disk = {path.name: path.read_text() for path in CRDS.glob("*.yaml")}
    assert on_disk == rendered, "crds/ is stale: run `admitter crds`"


def test_cli_check_reports_stale_directory(tmp_path, capsys):
    assert main(["crds", "--out", str(tmp_path)]) == 0
    assert main(["crds", "--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "admitter.dev_workloads.yaml").write_text("# edited\n")
    assert main(["crds", "--out", str(tmp_path), "--check"]) == 1
    assert "admitter.dev_workloads.yaml" in capsys.readouterr().err


def _walk(node, path="schema"):
    yield path, node
    for key, value in node.get("properties", {}).items():
        yield from _walk(value, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from _walk(node[key], f"{path}.{key}")


def test_schemas_are_structural():
    for kind in KINDS:
        for path, node in _walk(structural_schema(kind)):
            text = yaml.safe_dump(node)
            assert "$ref" not in text, path
            assert "const" not in node, path
            has_type = "type" in node or node.get("x-kubernetes-int-or-string")
            assert has_type, f"{kind.kind_name} {path} has no type"
            if "properties" in node:
                assert "additionalProperties" not in node, path


def test_every_field_is_described():
    for kind in KINDS:
        for path, node in _walk(structural_schema(kind)):
            named_field = not path.endswith((".items", ".additionalProperties"))
            if path.endswith(".metadata") or path.count(".") == 0 or not named_field:
                continue
            assert node.get("description"), f"{kind.kind_name} {path} has no description"


def test_cluster_queue_printer_columns():
    crd = yaml.safe_load(render_crds()["admitter.dev_clusterqueues.yaml"])
    columns = [c["name"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert columns == [
        "Parent", "GPU Quota", "GPU Allocated", "GPU Fair Share", "Pending", "Admitted", "Age",
    ]
    assert crd["spec"]["names"]["shortNames"] == ["cq"]
    assert crd["spec"]["scope"] == "Cluster"
