"""The controller checks its own install: the webhook configurations registered with the API
server against the ones its settings need, as `admitter webhooks` renders them from the same
settings (`webhook_configurations`). An opt-in setting whose webhooks were never registered
would otherwise have no effect, silently.

Every replica checks (each serves the webhooks with the CA of its own certificate directory)
and reports in its log and its `admitter_install_problems` gauge; only the leader records
Events, so a problem is announced once, on the webhook configuration concerned.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from prometheus_client import Gauge

from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.events import EventRecorder
from admitter.kube.informer import Informer
from admitter.kube.names import CA_FILE, WEBHOOK_CONFIGURATION
from admitter.kube.objects import Obj

log = logging.getLogger(__name__)
PROBLEM_KINDS = (MISSING_CONFIGURATION, MISSING_WEBHOOK, UNEXPECTED_WEBHOOK, DIFFERENT_FIELD,
                 CA_BUNDLE) = ("missing_configuration", "missing_webhook", "unexpected_webhook",
                               "different_field", "ca_bundle")
"""The values of the `admitter_install_problems` gauge's `kind` label, each reported (0 when
absent) so an alert can name which kind appeared."""
RECHECK_EVERY = 30.0
"""Seconds between checks without a change: the CA file rotates without a watch event, and a
replica that just became the leader announces what it finds."""
FIX = "render what the settings need: admitter webhooks --config SETTINGS | kubectl apply -f -"
"""Ends every problem's log line and Event: the one command that mends any of them."""
HOOK_DEFAULTS: Obj = {"failurePolicy": "Fail", "matchPolicy": "Equivalent",
                      "namespaceSelector": {}, "objectSelector": {}, "timeoutSeconds": 10}
"""What the API server writes into a webhook that leaves these fields out (v1)."""
SERVICE_PORT_DEFAULT = 443
"""What the API server writes into a webhook's `clientConfig.service` that names no port."""
FINGERPRINT_DIGITS = 16
"""Hex digits of a certificate's SHA-256 named in a problem: 64 bits tell any two CAs apart
in a quarter of the digest's length, which keeps the log line and Event short."""


@dataclass(frozen=True)
class Problem:
    """One difference; `expected` and `found` are compact JSON, or a certificate's name."""

    kind: str
    configuration: str
    webhook: str = ""
    field: str = ""
    expected: str = ""
    found: str = ""

    def detail(self) -> str:
        if self.kind == MISSING_CONFIGURATION:
            return f"not registered (expected webhooks {self.expected})"
        if self.kind == MISSING_WEBHOOK:
            return f"webhook {self.webhook} is missing"
        if self.kind == UNEXPECTED_WEBHOOK:
            return f"webhook {self.webhook} is registered, but these settings do not need it"
        return f"webhook {self.webhook}: {self.field} is {self.found}, expected {self.expected}"

    def __str__(self) -> str:
        return f"{self.configuration} {WEBHOOK_CONFIGURATION}: {self.detail()}"


def install_problems(expected: Sequence[Obj], registered: Mapping[str, Obj | None],
                     served_ca: x509.Certificate | None, endpoint_known: bool) -> list[Problem]:
    """What differs between the `expected` configurations and the `registered` ones (by
    kind; None: not registered). Every field a webhook has on either side is compared, after
    the API server's defaults; `clientConfig` only when the controller knows where it is
    reached (`endpoint_known`), and its `caBundle` must hold `served_ca`, when known."""
    problems: list[Problem] = []
    for configuration in expected:
        kind = configuration["kind"]
        wanted = {hook["name"]: hook for hook in configuration["webhooks"]}
        found = registered.get(kind)
        if found is None:
            problems.append(Problem(MISSING_CONFIGURATION, kind, expected=", ".join(wanted)))
            continue
        hooks = {hook["name"]: hook for hook in found.get("webhooks") or ()}
        problems += [Problem(MISSING_WEBHOOK, kind, name) for name in wanted if name not in hooks]
        problems += [Problem(UNEXPECTED_WEBHOOK, kind, name) for name in hooks
                     if name not in wanted]
        for name in (name for name in wanted if name in hooks):
            mutating = kind.startswith("Mutating")
            want, have = _normalized(wanted[name], mutating), _normalized(hooks[name], mutating)
            if not endpoint_known:
                del want["clientConfig"], have["clientConfig"]
            problems += [Problem(DIFFERENT_FIELD, kind, name, field, _json(want.get(field)),
                                 _json(have.get(field)))
                         for field in sorted(want.keys() | have.keys())
                         if want.get(field) != have.get(field)]
            if served_ca is not None:
                problems += _ca_problems(kind, name, hooks[name], served_ca)
    return problems


def _normalized(hook: Obj, mutating: bool) -> Obj:
    """The webhook as the API server stores it, without its name and CA bundle."""
    found = {**HOOK_DEFAULTS, **({"reinvocationPolicy": "Never"} if mutating else {}), **hook}
    del found["name"]
    found["rules"] = [{"scope": "*", **rule} for rule in hook.get("rules") or ()]
    client = {key: value for key, value in (hook.get("clientConfig") or {}).items()
              if key != "caBundle"}
    if "service" in client:
        client["service"] = {"port": SERVICE_PORT_DEFAULT, **client["service"]}
    found["clientConfig"] = client
    return found


def _ca_problems(kind: str, name: str, hook: Obj, served_ca: x509.Certificate) -> list[Problem]:
    bundle = (hook.get("clientConfig") or {}).get("caBundle") or ""
    try:
        trusted = x509.load_pem_x509_certificates(base64.b64decode(bundle, validate=True))
        found = ", ".join(map(_certificate, trusted))
    except ValueError:
        trusted, found = [], "empty" if not bundle else "not a PEM bundle"
    if served_ca in trusted:
        return []
    return [Problem(CA_BUNDLE, kind, name, "clientConfig.caBundle",
                    f"to hold the served CA {_certificate(served_ca)}", found)]


def _certificate(cert: x509.Certificate) -> str:
    fingerprint = cert.fingerprint(hashes.SHA256()).hex()[:FINGERPRINT_DIGITS]
    return f"{cert.subject.rfc4514_string()} (sha256 {fingerprint})"


def _json(value: Any) -> str:
    return "unset" if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def served_ca(cert_dir: Path | None) -> x509.Certificate | None:
    """The CA of the certificate directory the webhooks are served from, if readable."""
    if cert_dir is None:
        return None
    try:
        return x509.load_pem_x509_certificate((cert_dir / CA_FILE).read_bytes())
    except (OSError, ValueError):
        return None  # being rotated, or no webhooks served: nothing to compare with


class InstallCheck:
    """Watches both configurations and reports `install_problems` on every change."""

    def __init__(self, client: Kube, expected: Sequence[Obj], cert_dir: Path | None,
                 events: EventRecorder, gauge: Gauge, leading: Callable[[], bool]) -> None:
        self.expected = expected
        self.cert_dir = cert_dir
        self.events = events
        self.gauge = gauge
        self.leading = leading
        query = {"fieldSelector": f"metadata.name={WEBHOOK_CONFIGURATION}"}
        self.informers = {
            "MutatingWebhookConfiguration": Informer(client, kube.MUTATING_WEBHOOK_CONFIGURATIONS,
                                                     self._changed, query),
            "ValidatingWebhookConfiguration": Informer(
                client, kube.VALIDATING_WEBHOOK_CONFIGURATIONS, self._changed, query)}
        self.changed = asyncio.Event()
        self.logged: list[Problem] | None = None
        self.announced: dict[str, list[Problem]] = {}
        """Per configuration, the problems this replica last recorded an Event for."""

    def _changed(self, event: str, obj: Obj) -> None:
        self.changed.set()

    async def run(self) -> None:
        await asyncio.gather(*(informer.run() for informer in self.informers.values()),
                             self._checks())

    async def _checks(self) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in self.informers.values()))
        while True:
            self.changed.clear()
            try:
                self.check(time.time())
            except Exception:  # a report must never end the controller: log it, check again
                log.exception("install check failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), RECHECK_EVERY)

    def check(self, now: float) -> list[Problem]:
        registered = {kind: informer.get("", WEBHOOK_CONFIGURATION)
                      for kind, informer in self.informers.items()}
        problems = install_problems(self.expected, registered, served_ca(self.cert_dir),
                                    self.cert_dir is not None)
        for kind in PROBLEM_KINDS:
            self.gauge.labels(kind).set(sum(problem.kind == kind for problem in problems))
        if problems != self.logged:
            if problems:
                log.warning("install check: the webhook configurations do not match the "
                            "settings: %s; %s", "; ".join(map(str, problems)), FIX)
            else:
                log.info("install check: the webhook configurations match the settings")
            self.logged = problems
        if self.leading():
            for kind, found in registered.items():
                self._announce(kind, found, [p for p in problems if p.configuration == kind], now)
        return problems

    def _announce(self, kind: str, found: Obj | None, problems: list[Problem],
                  now: float) -> None:
        if problems == self.announced.get(kind, []):
            return
        self.announced[kind] = problems
        # On the configuration itself, where an admin looks (or would create it when missing).
        uid = {"uid": found["metadata"]["uid"]} if found else {}
        target = {"apiVersion": kube.MUTATING_WEBHOOK_CONFIGURATIONS.group_version,
                  "metadata": {"name": WEBHOOK_CONFIGURATION, **uid}}
        if problems:
            message = "; ".join(problem.detail() for problem in problems)
            self.events.record(target, kind, "Warning", "WebhooksDoNotMatchSettings",
                               f"{message}; {FIX}", now)
        else:
            self.events.record(target, kind, "Normal", "WebhooksMatchSettings",
                               "the webhooks match the settings again", now)
