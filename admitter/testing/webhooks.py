"""Serve an admission webhook over HTTPS on 127.0.0.1 and point the local API server at it.

The API server runs on the same host, so a `clientConfig.url` webhook needs no Service; the
certificate comes from `admitter.pki` and its CA goes into `caBundle`.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import ssl
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from admitter import pki
from admitter.api.settings import Settings
from admitter.commands.certs import mint, write
from admitter.kube.names import NAMESPACE, SERVICE
from admitter.webhook.lookup import ApiLookup, SharedReads
from admitter.webhook.registration import (
    point_at_url,
    register_url_webhooks,
    register_webhook_configurations,
)
from admitter.webhook.server import start_webhook_server


@asynccontextmanager
async def serve_https(app: web.Application, cert: pki.CertKey) -> AsyncIterator[int]:
    """Run `app` with TLS on a free 127.0.0.1 port, yielding the port."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as tmp:  # ssl only loads keys from files
        cert.write(Path(tmp) / "tls.crt", Path(tmp) / "tls.key")
        context.load_cert_chain(Path(tmp) / "tls.crt", Path(tmp) / "tls.key")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


def mutating_webhook_configuration(
    name: str,
    url: str,
    ca_pem: bytes,
    namespace: str | None = None,
    resources: Sequence[str] = ("pods",),
    operations: Sequence[str] = ("CREATE",),
) -> dict[str, Any]:
    """A fail-closed MutatingWebhookConfiguration calling `url` for core `resources`.

    With `namespace`, only requests in that namespace reach the webhook, so a test's webhook
    cannot disturb other tests sharing the cluster.
    """
    selector = {} if namespace is None else {"kubernetes.io/metadata.name": namespace}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"{name}.admitter.dev",
                "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode()},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": list(operations),
                        "resources": list(resources),
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {"matchLabels": selector},
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 5,
            }
        ],
    }


def admission_response(
    review: dict[str, Any], patch: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """An allowing AdmissionReview answer to `review`, applying `patch` (JSON Patch) if given."""
    response: dict[str, Any] = {"uid": review["request"]["uid"], "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


@asynccontextmanager
async def admitter_webhooks(api: Any, settings: Settings, cert_dir: Path,
                            controller_usernames: Sequence[str],
                            configurations: Sequence[dict[str, Any]] = (),
                            ) -> AsyncIterator[int]:
    """admitter's own webhooks served on a free 127.0.0.1 port and registered with the API
    server by URL, as `admitter run --webhook-url-host` does; yields the port. With
    `configurations` (Mutating, Validating, pointed at the Service, e.g. from the Helm chart),
    those are registered instead, pointed at the port."""
    certs = mint(SERVICE, NAMESPACE, dt.timedelta(days=1))
    write(certs, cert_dir)
    runner = await start_webhook_server(settings, SharedReads(ApiLookup(api)), cert_dir, 0,
                                        host="127.0.0.1",
                                        controller_usernames=controller_usernames)
    try:
        port: int = runner.addresses[0][1]
        if configurations:
            mutating, validating = (point_at_url(c, f"127.0.0.1:{port}", certs.ca.cert_pem)
                                    for c in configurations)
            await register_webhook_configurations(api, mutating, validating)
        else:
            await register_url_webhooks(api, f"127.0.0.1:{port}", certs.ca.cert_pem, settings)
        yield port
    finally:
        await runner.cleanup()
