"""`admitter webhooks`: the webhook configurations the settings need, rendered from the
settings themselves, so the opt-in webhooks of `unlabelledWork` (and their namespace selector)
are never pasted by hand: `admitter webhooks --config settings.yaml | kubectl apply -f -`."""

from __future__ import annotations

import argparse
from pathlib import Path

from admitter.api import yaml_text
from admitter.api.errors import InputError
from admitter.commands.run import load_settings
from admitter.kube.objects import Obj
from admitter.webhook.registration import endpoint_client_config, settings_configurations


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "webhooks", help="print the webhook configurations the settings need, as YAML")
    parser.add_argument("--config", help="settings YAML (the Settings model); default values")
    parser.add_argument("--ca-file", help="PEM CA bundle to write into every webhook")
    parser.add_argument("--url-host", metavar="HOST:PORT",
                        help="point the webhooks at https://HOST:PORT (a controller outside the "
                             "cluster; needs --ca-file) instead of the in-cluster Service")
    parser.set_defaults(handler=run)


def _read_ca(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise InputError("--ca-file", [(path, str(error))]) from None


def rendered(settings_path: str | None, ca_path: str | None, url_host: str | None,
             ) -> tuple[Obj, Obj]:
    """The Mutating- and ValidatingWebhookConfiguration for these settings and this endpoint."""
    settings = load_settings(settings_path)
    ca = _read_ca(ca_path) if ca_path else None
    if url_host and ca is None:
        raise InputError("--url-host", [(url_host, "needs --ca-file: the API server must "
                                                   "trust the controller's certificate")])
    return settings_configurations(endpoint_client_config(url_host, ca), settings)


def run(args: argparse.Namespace) -> int:
    print(yaml_text.dump_all(rendered(args.config, args.ca_file, args.url_host),
                             sort_keys=False), end="")
    return 0
