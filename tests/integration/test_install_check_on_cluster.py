"""`admitter run` checks its own install on the real control plane: with settings that opt
into unlabelled work, registrations that lack the opt-in webhooks get a Warning Event on each
webhook configuration naming what is missing, and the `admitter_install_problems` gauge counts
them; once the configurations `admitter webhooks` renders from the same settings are
registered, the gauge is back to 0 and a Normal Event says so."""

from __future__ import annotations

import datetime as dt
import re
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from admitter_world import ControllerProcess

from admitter.commands.certs import mint, write
from admitter.controller.install_check import PROBLEM_KINDS
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.names import CA_FILE, NAMESPACE, SERVICE, WEBHOOK_CONFIGURATION
from admitter.kube.objects import Obj
from admitter.testing import LocalCluster
from admitter.testing.cluster import KubectlError
from admitter.testing.waiting import eventually

pytestmark = pytest.mark.integration
OPT_IN = """cycle: 1s
unlabelledWork:
  namespaceSelector:
    matchLabels: {{admitter.dev/install-check: "{token}"}}
  localQueue: default
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _gauge(port: int) -> dict[str, float]:
    async with aiohttp.ClientSession() as session, session.get(
            f"http://127.0.0.1:{port}/metrics") as response:
        text = await response.text()
    return {kind: float(value) for kind, value in re.findall(
        r'^admitter_install_problems\{kind="([a-z_]+)"\} (\S+)$', text, re.MULTILINE)}


async def _events(api: Kube, identity: str) -> list[Obj]:
    """The controller's Events on both webhook configurations, oldest first."""
    listed = await api.request("GET", kube.EVENTS.path("default"), query={
        "fieldSelector": f"involvedObject.name={WEBHOOK_CONFIGURATION}"})
    mine = [e for e in listed["items"] if e.get("reportingInstance") == identity]
    return sorted(mine, key=lambda e: (e["firstTimestamp"], e["metadata"]["creationTimestamp"]))


def _register(cluster: LocalCluster, *argv: str) -> None:
    """Make both configurations what `admitter webhooks ARGV` renders: replaced, or created
    where gone, as the controller registers them (`register_webhook_configurations`). They are
    cluster-wide, and an earlier test's install may still be removing its own."""
    rendered = subprocess.run([sys.executable, "-m", "admitter.cli", "webhooks", *argv],
                              capture_output=True, text=True, check=True).stdout
    replaced = cluster.kubectl("replace", "-f", "-", input=rendered, check=False)
    if replaced.returncode and "NotFound" in replaced.stderr:
        cluster.kubectl("apply", "-f", "-", input=rendered)
    elif replaced.returncode:
        raise KubectlError(replaced.returncode, replaced.args, replaced.stdout, replaced.stderr)


async def test_the_controller_names_the_webhooks_its_settings_lack_until_they_are_registered(
        local_cluster: LocalCluster, kubeconfig: Path, api: Kube, namespace: str,
        tmp_path: Path) -> None:
    token, identity = secrets.token_hex(3), f"install-check-{secrets.token_hex(3)}"
    certs = tmp_path / "certs"
    write(mint(SERVICE, NAMESPACE, dt.timedelta(days=1)), certs)
    settings = tmp_path / "settings.yaml"
    settings.write_text(OPT_IN.format(token=token))  # selects no namespace: no blast radius
    metrics, webhooks = _free_port(), _free_port()
    endpoint = ("--url-host", f"127.0.0.1:{webhooks}", "--ca-file", str(certs / CA_FILE))
    controller = ControllerProcess(
        kubeconfig, tmp_path / "controller.log", "--metrics-address", f"127.0.0.1:{metrics}",
        "--webhook-cert-dir", str(certs), "--webhook-address", f"127.0.0.1:{webhooks}",
        "--webhook-url-host", f"127.0.0.1:{webhooks}", "--identity", identity,
        "--lease-namespace", namespace, "--lease-name", identity,
        settings_yaml=settings.read_text())
    try:
        async def counted(expected: dict[str, float]) -> dict[str, float] | None:
            try:
                found = await _gauge(metrics)
            except aiohttp.ClientError:
                return None  # not serving yet
            if set(found) != set(PROBLEM_KINDS):
                return None  # not checked yet
            return found if {k: v for k, v in found.items() if v} == expected else None

        # It registers what its settings need itself (`--webhook-url-host`): nothing to report.
        await eventually(lambda: counted({}), "the install check to find nothing", 60)

        _register(local_cluster, *endpoint)  # the plain configurations, without the opt-in
        await eventually(lambda: counted({"missing_webhook": 3.0}), "3 missing webhooks", 60)

        async def warned() -> list[Obj] | None:
            found = [e for e in await _events(api, identity) if e["type"] == "Warning"]
            return found if len(found) == 2 else None

        warnings = {e["involvedObject"]["kind"]: e for e in await eventually(
            warned, "a Warning Event on each configuration", 60)}
        mutating = warnings["MutatingWebhookConfiguration"]["message"]
        assert "webhook mutate-unlabelled-jobs.admitter.dev is missing" in mutating
        assert "webhook mutate-pods.admitter.dev is missing" in mutating
        assert "webhook validate-pods.admitter.dev is missing" in (
            warnings["ValidatingWebhookConfiguration"]["message"])
        assert warnings["MutatingWebhookConfiguration"]["reason"] == "WebhooksDoNotMatchSettings"
        assert warnings["MutatingWebhookConfiguration"]["involvedObject"]["uid"]
        assert "install check: the webhook configurations do not match" in (
            tmp_path / "controller.log").read_text()

        _register(local_cluster, "--config", str(settings), *endpoint)
        await eventually(lambda: counted({}), "the gauge back to 0", 60)

        async def fixed() -> bool:
            return [e["reason"] for e in await _events(api, identity)
                    if e["type"] == "Normal"] == ["WebhooksMatchSettings"] * 2

        await eventually(fixed, "a Normal Event on each configuration", 60)
    finally:
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            local_cluster.kubectl("delete", kind, WEBHOOK_CONFIGURATION, "--ignore-not-found")
        controller.kill()
