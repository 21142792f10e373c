"""Every read the webhooks make is bounded, and a read the API server never answers denies
the request with the reason instead of hanging until the API server gives up on the call."""

import asyncio
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client

from admitter.webhook.lookup import LOOKUP_TIMEOUT, ApiLookup, LookupTimeout, SharedReads
from admitter.webhook.registration import (
    GATE_TIMEOUT_SECONDS,
    TIMEOUT_SECONDS,
    url_client_config,
    webhook_configurations,
)
from admitter.webhook.server import DECISION_TIMEOUT


class SilentServer:
    """Accepts connections and reads requests, never answering: an API server that stopped
    mid-answer, or a path that was cut."""

    def __init__(self) -> None:
        self.requests = 0
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.requests += 1
        try:
            while await reader.read(65536):
                pass
        finally:
            writer.close()


@pytest.fixture
async def silent() -> AsyncIterator[SilentServer]:
    server = SilentServer()
    listening = await asyncio.start_server(server._serve, "127.0.0.1", 0)
    server.port = listening.sockets[0].getsockname()[1]
    async with listening:
        yield server
        listening.close()


@pytest.fixture
async def api(silent: SilentServer) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration(host=f"http://127.0.0.1:{silent.port}")
    api = client.ApiClient(configuration)
    yield api
    await api.close()


async def test_a_read_the_api_server_never_answers_raises_a_timeout_naming_it(api, silent):
    lookup = ApiLookup(api, timeout=0.2)
    with pytest.raises(LookupTimeout, match=r"LocalQueues of namespace 'team-a' .* 0.2s"):
        await lookup.local_queues("team-a")
    with pytest.raises(LookupTimeout, match=r"PriorityClass 'high'"):
        await lookup.priority_value("high")
    with pytest.raises(LookupTimeout, match=r"Workload team-a/job-x"):
        await lookup.workload("team-a", "job-x")
    assert silent.requests >= 1


async def test_a_timed_out_shared_read_is_not_joined_by_later_callers(api, silent):
    """A hung read left in flight would make every later webhook call wait on it."""
    shared = SharedReads(ApiLookup(api, timeout=0.2))
    first = await asyncio.gather(shared.cluster_queues(), shared.cluster_queues(),
                                 return_exceptions=True)
    assert all(isinstance(outcome, LookupTimeout) for outcome in first)
    sent = silent.requests
    with pytest.raises(LookupTimeout):
        await shared.cluster_queues()
    assert silent.requests == sent + 1, "the later call sent a request of its own"


def test_reads_and_decisions_end_before_the_api_server_gives_up_on_the_webhook():
    assert LOOKUP_TIMEOUT < DECISION_TIMEOUT < TIMEOUT_SECONDS
    for configuration in webhook_configurations(url_client_config("h:1", b"ca")):
        for hook in configuration["webhooks"]:
            # the placement webhook reads nothing, and waits less (GATE_TIMEOUT_SECONDS)
            expected = GATE_TIMEOUT_SECONDS if hook["name"] == "gate-pods.admitter.dev" else (
                TIMEOUT_SECONDS)
            assert hook["timeoutSeconds"] == expected, hook["name"]
