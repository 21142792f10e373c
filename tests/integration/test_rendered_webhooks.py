"""The webhook configurations `admitter webhooks` renders from opt-in settings are accepted by
the real API server (server-side dry run: registering fail-closed webhooks with no server
behind them would block the session's other tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from admitter.testing import LocalCluster

pytestmark = pytest.mark.integration
OPT_IN = """
unlabelledWork:
  namespaceSelector:
    matchLabels: {admitter.dev/quota: enforced}
  localQueue: default
"""


def test_rendered_opt_in_webhooks_are_accepted_by_the_api_server(
        local_cluster: LocalCluster, tmp_path: Path) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text(OPT_IN)
    rendered = subprocess.run(
        [sys.executable, "-m", "admitter.cli", "webhooks", "--config", str(settings)],
        capture_output=True, text=True, check=True).stdout
    applied = local_cluster.kubectl("apply", "--dry-run=server", "-o", "name", "-f", "-",
                                    input=rendered)
    assert applied.stdout.split() == [
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/admitter-webhook",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/admitter-webhook",
    ]
    # The dry run does validate: an operation the API does not know is refused.
    broken = rendered.replace("- CREATE", "- NOPE", 1)
    bad = local_cluster.kubectl("apply", "--dry-run=server", "-f", "-", check=False, input=broken)
    assert bad.returncode != 0 and "NOPE" in bad.stderr
