"""The webhooks on a thread of their own answer while the controller's event loop is busy:
a Job creation waits on them, and must not wait for a pass to finish its snapshot."""

import contextlib
import json
import threading
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from review_fixtures import job, review, standard_lookup
from test_server import CA, client_context, install_cert

from admitter.api.settings import Settings
from admitter.kube.names import MUTATE_JOBS_PATH
from admitter.webhook.server import start_webhook_server
from admitter.webhook.thread import WebhookThread


def mutate_in_another_thread(url: str, answered: threading.Event, answers: list[dict]) -> None:
    body = json.dumps(review(job())).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=client_context(CA), timeout=30) as response:
        answers.append(json.loads(response.read()))
    answered.set()


async def test_a_review_is_answered_while_the_main_event_loop_is_blocked(tmp_path: Path) -> None:
    install_cert(tmp_path, "webhooks")
    stopped = threading.Event()

    @contextlib.asynccontextmanager
    async def serve() -> AsyncIterator[web.AppRunner]:
        runner = await start_webhook_server(Settings(), standard_lookup(), tmp_path, 0,
                                            host="127.0.0.1")
        try:
            yield runner
        finally:
            await runner.cleanup()
            stopped.set()

    webhooks = WebhookThread(serve)
    runner = await webhooks.start()
    url = f"https://127.0.0.1:{runner.addresses[0][1]}{MUTATE_JOBS_PATH}"
    answered, answers = threading.Event(), []
    caller = threading.Thread(target=mutate_in_another_thread, args=(url, answered, answers))
    caller.start()
    # Block this loop, as a long synchronous stretch of a pass would: a webhook served from
    # it could not answer until the wait below gave up.
    assert answered.wait(30), "no answer while the main loop was blocked"
    caller.join()
    assert answers[0]["response"]["allowed"] is True
    assert answers[0]["response"]["patchType"] == "JSONPatch", "the Job comes back suspended"
    await webhooks.stop()
    assert stopped.is_set(), "stopping cleans the server up"


async def test_a_server_that_cannot_start_fails_the_start(tmp_path: Path) -> None:
    @contextlib.asynccontextmanager
    async def serve() -> AsyncIterator[web.AppRunner]:
        raise OSError("address already in use")
        yield  # pragma: no cover

    with pytest.raises(OSError, match="address already in use"):
        await WebhookThread(serve).start()
