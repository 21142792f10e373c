"""`admitter run`: the controller, in or out of a cluster."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import yaml
from aiohttp import web
from pydantic import ValidationError

from admitter.api.errors import InputError
from admitter.api.settings import Settings
from admitter.controller.install_check import InstallCheck
from admitter.controller.leader import LEASE_SECONDS, Elector
from admitter.controller.reconciler import Reconciler
from admitter.controller.server import health_app, serve
from admitter.kube.client import Kube
from admitter.kube.names import CA_FILE, CONTROLLER_USERNAME
from admitter.webhook.lookup import ApiLookup, SharedReads
from admitter.webhook.registration import (
    endpoint_client_config,
    register_url_webhooks,
    settings_configurations,
)
from admitter.webhook.server import DEFAULT_PORT, start_webhook_server
from admitter.webhook.thread import WebhookThread


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("run", help="run the controller against a cluster")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    parser.add_argument("--config", help="settings YAML (the Settings model); default values")
    parser.add_argument("--metrics-address", default="0.0.0.0:8080",
                        help="host:port for /metrics, /healthz, /readyz")
    parser.add_argument("--webhook-address", default=f"0.0.0.0:{DEFAULT_PORT}",
                        help="host:port of the admission webhooks (HTTPS)")
    parser.add_argument("--webhook-cert-dir",
                        help="directory with tls.crt and tls.key; without it no webhook is "
                        "served (e.g. when running out of cluster for development)")
    parser.add_argument("--webhook-url-host", metavar="HOST:PORT",
                        help="register the webhooks with the API server at "
                        "https://HOST:PORT/<path>, trusting ca.crt of --webhook-cert-dir: for a "
                        "controller running outside the cluster (docs/webhooks.md)")
    parser.add_argument("--controller-username", action="append",
                        help="identity allowed to unsuspend Jobs (repeatable; default: "
                        "admitter's service account)")
    parser.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                        help="elect a leader on a Lease (default on)")
    parser.add_argument("--lease-namespace", default="admitter-system",
                        help="admitter's own namespace: its Lease, and the Secrets holding "
                        "the kubeconfigs of WorkerClusters")
    parser.add_argument("--lease-name", default="admitter")
    parser.add_argument("--lease-duration", type=int, default=LEASE_SECONDS,
                        help="seconds a leader holds the Lease without renewing it")
    parser.add_argument("--identity", default=f"{socket.gethostname()}-{os.getpid()}",
                        help="this replica's name in the Lease and in Events")
    parser.add_argument("--log-level", default="INFO")
    parser.set_defaults(handler=run)


def load_settings(path: str | None) -> Settings:
    if path is None:
        return Settings()
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
        return Settings.model_validate(data)
    except ValidationError as error:
        raise InputError.from_validation(path, error) from None
    except (OSError, yaml.YAMLError) as error:
        raise InputError(path, [("(file)", str(error))]) from None


def run(args: argparse.Namespace) -> int:
    if args.webhook_url_host and not args.webhook_cert_dir:
        raise InputError("--webhook-url-host", [(
            "--webhook-cert-dir", "required: the webhooks are served with its tls.crt and "
            "tls.key, and registered trusting its ca.crt (`admitter certs --out DIR`)")])
    logging.basicConfig(level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = load_settings(args.config)
    asyncio.run(_main(args, settings))
    return 0


async def _main(args: argparse.Namespace, settings: Settings) -> None:
    client = await Kube.from_kubeconfig(args.kubeconfig)
    elector = Elector(client, args.lease_namespace, args.lease_name, args.identity,
                      args.lease_duration)
    # Hazard: every controller write asks the fence first; only Lease writes go without it.
    leads = elector.leading if args.leader_elect else (lambda: True)
    reconciler = Reconciler(client.fenced(leads), settings, args.identity,
                            fencing_token=elector.fencing_token if args.leader_elect else None,
                            namespace=args.lease_namespace)
    host, _, port = args.metrics_address.rpartition(":")
    runner = await serve(health_app(reconciler.metrics.registry, reconciler.caches.synced),
                         host or "0.0.0.0", int(port))
    webhooks = None
    if args.webhook_cert_dir:
        # Every replica serves the webhooks: the Service spreads calls over all of them.
        webhooks = WebhookThread(lambda: _serve_webhooks(args, settings))
        await webhooks.start()
        if args.webhook_url_host:
            await register_url_webhooks(client.api, args.webhook_url_host,
                                        (Path(args.webhook_cert_dir) / CA_FILE).read_bytes(),
                                        settings)
    leading = elector.run(reconciler.run) if args.leader_elect else reconciler.run()
    tasks = [asyncio.create_task(reconciler.run_informers()), asyncio.create_task(leading),
             asyncio.create_task(_install_check(args, settings, client, reconciler, leads).run())]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if webhooks is not None:
            await webhooks.stop()
        await runner.cleanup()
        await client.close()


def _install_check(args: argparse.Namespace, settings: Settings, client: Kube,
                   reconciler: Reconciler, leads: Callable[[], bool]) -> InstallCheck:
    """The registered webhooks compared with those `admitter webhooks` renders from the same
    settings, pointed where this controller is reached when it serves them."""
    expected = settings_configurations(endpoint_client_config(args.webhook_url_host, None),
                                       settings)
    cert_dir = Path(args.webhook_cert_dir) if args.webhook_cert_dir else None
    return InstallCheck(client, expected, cert_dir, reconciler.events,
                        reconciler.metrics.install_problems, leads)


@contextlib.asynccontextmanager
async def _serve_webhooks(args: argparse.Namespace,
                          settings: Settings) -> AsyncIterator[web.AppRunner]:
    """The webhooks with an API client of their own (clients are bound to one event loop)."""
    client = await Kube.from_kubeconfig(args.kubeconfig)
    try:
        host, _, port = args.webhook_address.rpartition(":")
        runner = await start_webhook_server(
            settings, SharedReads(ApiLookup(client.api)), Path(args.webhook_cert_dir), int(port),
            host=host or "0.0.0.0",
            controller_usernames=args.controller_username or (CONTROLLER_USERNAME,))
        try:
            yield runner
        finally:
            await runner.cleanup()
    finally:
        await client.close()
