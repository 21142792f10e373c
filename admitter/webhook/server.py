"""The webhook HTTPS server: one route per webhook, AdmissionReview in, AdmissionReview out.

No metrics of its own: the API server already counts calls, rejections and latency per
webhook (`apiserver_admission_webhook_*`).

    runner = await start_webhook_server(settings, ApiLookup(api), Path("/etc/admitter/tls"))
    ...
    await runner.cleanup()
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from json import JSONDecodeError
from pathlib import Path

import aiohttp
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from admitter.api.settings import Settings
from admitter.kube.names import (
    CONTROLLER_USERNAME,
    GATE_PODS_PATH,
    HEALTH_PATH,
    MUTATE_JOBS_PATH,
    MUTATE_PODS_PATH,
    VALIDATE_JOBS_PATH,
    VALIDATE_PODS_PATH,
    VALIDATE_RESOURCES_PATH,
)
from admitter.webhook.jobs import JobPolicy, mutate_job, validate_job
from admitter.webhook.lookup import Lookup, LookupTimeout
from admitter.webhook.pods import gate_pod, mutate_pod, validate_pod
from admitter.webhook.resources import validate_resource
from admitter.webhook.review import (
    AdmissionRequest,
    ReviewError,
    Verdict,
    deny,
    parse_review,
    review_response,
)
from admitter.webhook.tls import ReloadingCertificate

log = logging.getLogger(__name__)

DEFAULT_PORT = 9443
"""The port the webhooks are served on: controller-runtime's webhook port (Kueue's too), above
1024 so a process that runs as no privileged user (deploy/deployment.yaml) may listen on it."""
MAX_BODY = 8 * 1024 * 1024
"""A review carries the object twice (old and new); API objects are at most ~1.5 MiB each."""

DECISION_TIMEOUT = 4.0
"""Seconds a decision may take in all, below the `TIMEOUT_SECONDS` the API server waits: an
answer that says the cluster was too slow beats the API server's bare "context deadline
exceeded"."""

Decide = Callable[[AdmissionRequest], Awaitable[Verdict]]


def build_app(
    settings: Settings,
    lookup: Lookup,
    controller_usernames: Iterable[str] = (CONTROLLER_USERNAME,),
    decision_timeout: float = DECISION_TIMEOUT,
) -> web.Application:
    """The routes, with the Job rules bound to `settings` and the controller's identities."""
    policy = JobPolicy(settings.max_min_runtime, frozenset(controller_usernames),
                       settings.non_preemptible_priority, settings.unlabelled_work,
                       settings.device_classes())

    async def mutate(request: AdmissionRequest) -> Verdict:
        return await mutate_job(request, lookup, policy)

    async def validate_jobs(request: AdmissionRequest) -> Verdict:
        return await validate_job(request, lookup, policy)

    async def validate_resources(request: AdmissionRequest) -> Verdict:
        return await validate_resource(request, lookup, policy)

    async def mutate_pods(request: AdmissionRequest) -> Verdict:
        return await mutate_pod(request, lookup, policy)

    async def validate_pods(request: AdmissionRequest) -> Verdict:
        return validate_pod(request, policy)

    async def gate_pods(request: AdmissionRequest) -> Verdict:
        return gate_pod(request)

    app = web.Application(client_max_size=MAX_BODY)
    for path, name, decide in (
        (MUTATE_JOBS_PATH, "mutate-jobs", mutate),
        (VALIDATE_JOBS_PATH, "validate-jobs", validate_jobs),
        (VALIDATE_RESOURCES_PATH, "validate-admitter", validate_resources),
        (MUTATE_PODS_PATH, "mutate-pods", mutate_pods),
        (VALIDATE_PODS_PATH, "validate-pods", validate_pods),
        (GATE_PODS_PATH, "gate-pods", gate_pods),
    ):
        app.router.add_post(path, _endpoint(name, decide, decision_timeout))
    app.router.add_get(HEALTH_PATH, _healthz)
    return app


async def start_webhook_server(
    settings: Settings,
    lookup: Lookup,
    cert_dir: Path,
    port: int = DEFAULT_PORT,
    *,
    host: str = "0.0.0.0",
    controller_usernames: Iterable[str] = (CONTROLLER_USERNAME,),
    decision_timeout: float = DECISION_TIMEOUT,
) -> web.AppRunner:
    """Serve the webhooks with TLS from `cert_dir` (tls.crt, tls.key, reloaded on rotation).

    Returns the started runner: `runner.addresses[0][1]` is the port (useful with port 0),
    `await runner.cleanup()` stops it.
    """
    certificate = ReloadingCertificate(cert_dir)
    app = build_app(settings, lookup, controller_usernames, decision_timeout)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=certificate.context)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


NETWORK_ERRORS = (aiohttp.ClientError, HttpProcessingError, ConnectionError)
"""Failures to reach or read from the API server (ClientConnectorError, ServerDisconnectedError,
a ClientPayloadError around a TransferEncodingError, ...): logged in one line, no traceback."""


def _endpoint(webhook: str, decide: Decide,
              timeout: float) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(http_request: web.Request) -> web.Response:
        try:
            request = parse_review(await http_request.json())
        except (JSONDecodeError, ReviewError) as error:
            return web.json_response({"error": str(error)}, status=400)
        try:
            async with asyncio.timeout(timeout):
                verdict = await decide(request)
        except (LookupTimeout, TimeoutError) as error:
            # Fail closed, and say so: the cluster was too slow to check the request.
            log.warning("%s: gave up on %s: %r", webhook, request.display_name, error)
            reason = str(error) or f"the checks took longer than {timeout:g}s"
            verdict = deny(f"admitter could not check {request.display_name} in time "
                           f"({reason}); the API server is slow or unreachable, retry later",
                           504)
        except (ValueError, ArithmeticError) as error:
            # Input no rule foresaw: still the object's fault, so a denial the user can act
            # on, never a 500 that reads as admitter being down.
            log.exception("%s: could not read %s", webhook, request.display_name)
            verdict = deny(f"{request.display_name}: admitter cannot read this object: {error}",
                           422)
        except Exception as error:
            # An answer with the reason beats a bare 500 that the API server reports as
            # "failed calling webhook"; the failure policy would reject the request anyway.
            if isinstance(error, NETWORK_ERRORS):
                # Expected while the API server restarts: one line, no traceback.
                log.warning("%s: could not reach the API server for %s: %s: %s", webhook,
                            request.display_name, type(error).__name__, error)
            else:
                log.exception("%s: could not decide on %s", webhook, request.display_name)
            verdict = deny(f"admitter could not check this request ({error}); retry later", 500)
        else:  # a policy's denial; each failure above was logged once already
            if not verdict.allowed:
                log.info("%s denied %s for %s: %s",
                         webhook, request.display_name, request.username, verdict.message)
        return web.json_response(review_response(request.uid, verdict))

    return handle


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")
