"""The webhook configurations `admitter webhooks` renders from opt-in settings are accepted by
the real API server (server-side dry run: registering fail-closed webhooks with no server
behind them would block the session's other tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from admitter.testing import LocalCluster

pytestmark = pytest.mark.integration
OPT_IN = """
unlabelledWork:
  namespaceSelector:
    matchLabels: {{admitter.dev/quota: '{value}'}}
  localQueue: default
"""


# `1e5` and `y` are strings to PyYAML's writer and a number and a boolean to the API server's
# reader, unless the rendering quotes them.
@pytest.mark.parametrize("value", ["enforced", "1e5", "y"])
def test_rendered_opt_in_webhooks_are_accepted_by_the_api_server(
        local_cluster: LocalCluster, tmp_path: Path, value: str) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text(OPT_IN.format(value=value))
    rendered = subprocess.run(
        [sys.executable, "-m", "admitter.cli", "webhooks", "--config", str(settings)],
        capture_output=True, text=True, check=True).stdout
    applied = json.loads(local_cluster.kubectl(
        "apply", "--dry-run=server", "-o", "json", "-f", "-", input=rendered).stdout)
    assert [(item["kind"], item["metadata"]["name"]) for item in applied["items"]] == [
        ("MutatingWebhookConfiguration", "admitter-webhook"),
        ("ValidatingWebhookConfiguration", "admitter-webhook"),
    ]
    # The three unlabelled-work webhooks select the opted-in namespaces, label value intact.
    opted_in = [hook["namespaceSelector"]["matchLabels"] for item in applied["items"]
                for hook in item["webhooks"] if "matchLabels" in hook.get("namespaceSelector", {})]
    assert opted_in == [{"admitter.dev/quota": value}] * 3
    # The dry run does validate: an operation the API does not know is refused.
    broken = rendered.replace("- CREATE", "- NOPE", 1)
    bad = local_cluster.kubectl("apply", "--dry-run=server", "-f", "-", check=False, input=broken)
    assert bad.returncode != 0 and "NOPE" in bad.stderr
