"""`admitter certs --out DIR [--patch]`: mint the webhook's CA and serving certificate, and
optionally install them (caBundle into the webhook configurations, then the TLS Secret).

Rotation order matters with failurePolicy Fail: the API server must trust the new CA before a
replica serves the new certificate, so `--patch` writes the caBundle as new CA plus the
previous one (while still valid) first, and only then the Secret the pods reload from.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from admitter import pki
from admitter.kube.names import (
    CA_FILE,
    CERT_FILE,
    KEY_FILE,
    NAMESPACE,
    SECRET,
    SERVICE,
    WEBHOOK_CONFIGURATION,
)


@dataclass(frozen=True)
class WebhookCerts:
    ca: pki.CertKey
    serving: pki.CertKey


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "certs", help="mint the webhook CA and serving certificate; --patch installs them"
    )
    parser.add_argument("--out", required=True, type=Path, help="directory for the PEM files")
    parser.add_argument("--service", default=SERVICE, help=f"webhook Service (default {SERVICE})")
    parser.add_argument(
        "--namespace", default=NAMESPACE, help=f"namespace of the Service (default {NAMESPACE})"
    )
    parser.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    parser.add_argument("--host", action="append", default=[],
                        help="one more name or IP the certificate is valid for (repeatable), "
                        "e.g. the HOST of `admitter run --webhook-url-host HOST:PORT`")
    parser.add_argument(
        "--patch",
        action="store_true",
        help=f"put the CA into the {WEBHOOK_CONFIGURATION} webhook configurations and the "
        f"certificate into Secret {SECRET}",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig for --patch (default: the usual one)")
    parser.set_defaults(handler=run)


def webhook_hosts(service: str, namespace: str) -> list[str]:
    """Every name the API server (in cluster) or a local test may dial the webhook by."""
    base = f"{service}.{namespace}"
    return [service, base, f"{base}.svc", f"{base}.svc.cluster.local", "localhost", "127.0.0.1"]


def mint(service: str, namespace: str, validity: dt.timedelta,
         extra_hosts: Sequence[str] = ()) -> WebhookCerts:
    ca = pki.new_ca(f"{service}-ca", validity)
    hosts = [*webhook_hosts(service, namespace), *extra_hosts]
    return WebhookCerts(ca, pki.serving_cert(ca, f"{service}.{namespace}.svc", hosts, validity))


def write(certs: WebhookCerts, directory: Path) -> list[Path]:
    """ca.crt, tls.crt and tls.key: the layout the server and a TLS Secret volume share.

    The CA key is not written: the next rotation mints a new CA, so no signing key lingers.
    """
    certs.serving.write(directory / CERT_FILE, directory / KEY_FILE)
    pki.write_pem(directory / CA_FILE, certs.ca.cert_pem)
    return [directory / CA_FILE, directory / CERT_FILE, directory / KEY_FILE]


def ca_bundle(new_ca: bytes, previous: str | None, now: dt.datetime) -> str:
    """Base64 caBundle trusting `new_ca` and the newest previous CA while it is still valid."""
    pems = [new_ca]
    try:
        newest_old = x509.load_pem_x509_certificates(base64.b64decode(previous or ""))[0]
    except ValueError:  # none yet, or not PEM: nothing worth keeping
        return base64.b64encode(new_ca).decode()
    pem = newest_old.public_bytes(serialization.Encoding.PEM)
    if newest_old.not_valid_after_utc > now and pem != new_ca:
        pems.append(pem)
    return base64.b64encode(b"".join(pems)).decode()


async def install(
    api: client.ApiClient, certs: WebhookCerts, namespace: str, secret: str, configuration: str
) -> None:
    """caBundle into both webhook configurations first, then the Secret the pods mount."""
    registration = client.AdmissionregistrationV1Api(api)
    now = dt.datetime.now(dt.UTC)
    for read, patch in (
        (
            registration.read_mutating_webhook_configuration,
            registration.patch_mutating_webhook_configuration,
        ),
        (
            registration.read_validating_webhook_configuration,
            registration.patch_validating_webhook_configuration,
        ),
    ):
        current = await read(configuration)
        webhooks = [
            {
                "name": hook.name,
                "clientConfig": {
                    "caBundle": ca_bundle(certs.ca.cert_pem, hook.client_config.ca_bundle, now)
                },
            }
            for hook in current.webhooks or []
        ]
        await patch(configuration, {"webhooks": webhooks})
    await _upsert_secret(client.CoreV1Api(api), namespace, secret, _secret_data(certs))


def _secret_data(certs: WebhookCerts) -> dict[str, str]:
    files = {
        CA_FILE: certs.ca.cert_pem,
        CERT_FILE: certs.serving.cert_pem,
        KEY_FILE: certs.serving.key_pem,
    }
    return {name: base64.b64encode(data).decode() for name, data in files.items()}


async def _upsert_secret(
    core: client.CoreV1Api, namespace: str, name: str, data: dict[str, str]
) -> None:
    body = client.V1Secret(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace),
        type="kubernetes.io/tls",
        data=data,
    )
    try:
        await core.create_namespaced_secret(namespace, body)
    except ApiException as error:
        if error.status != 409:
            raise
        await core.replace_namespaced_secret(name, namespace, body)


async def _install_with_kubeconfig(args: argparse.Namespace, certs: WebhookCerts) -> None:
    api = await config.new_client_from_config(config_file=args.kubeconfig)
    async with api:
        await install(api, certs, args.namespace, SECRET, WEBHOOK_CONFIGURATION)


def run(args: argparse.Namespace) -> int:
    certs = mint(args.service, args.namespace, dt.timedelta(days=args.days), args.host)
    for path in write(certs, args.out):
        print(path)
    if not args.patch:
        return 0
    try:
        asyncio.run(_install_with_kubeconfig(args, certs))
    except ApiException as error:
        print(
            f"could not install the certificate: HTTP {error.status} {error.reason}; "
            "apply deploy/ first (`kubectl apply -k deploy/`) and check your permissions",
            file=sys.stderr,
        )
        return 1
    print(f"patched caBundle of {WEBHOOK_CONFIGURATION} and Secret {args.namespace}/{SECRET}")
    return 0
