"""The HTTPS server: routes answer AdmissionReviews, and a rotated certificate is served to the
next connection without a restart."""

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from review_fixtures import FakeLookup, job, review, standard_lookup

from admitter import pki
from admitter.api.settings import Settings
from admitter.kube.names import (
    CERT_FILE,
    HEALTH_PATH,
    KEY_FILE,
    MUTATE_JOBS_PATH,
    VALIDATE_JOBS_PATH,
    VALIDATE_RESOURCES_PATH,
)
from admitter.webhook.server import start_webhook_server

from builders.kube import topology

CA = pki.new_ca("test-webhook-ca")


def install_cert(cert_dir: Path, common_name: str, ca: pki.CertKey = CA) -> None:
    pki.serving_cert(ca, common_name, ["127.0.0.1"]).write(
        cert_dir / CERT_FILE, cert_dir / KEY_FILE
    )


def client_context(*cas: pki.CertKey) -> ssl.SSLContext:
    return ssl.create_default_context(cadata="".join(ca.cert_pem.decode() for ca in cas))


async def serve(cert_dir: Path, lookup) -> tuple[aiohttp.web.AppRunner, int]:
    runner = await start_webhook_server(Settings(), lookup, cert_dir, 0, host="127.0.0.1")
    return runner, runner.addresses[0][1]


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[str]:
    install_cert(tmp_path, "first")
    runner, port = await serve(tmp_path, standard_lookup())
    yield f"https://127.0.0.1:{port}"
    await runner.cleanup()


async def post(base: str, path: str, body) -> tuple[int, dict]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(base + path, json=body, ssl=client_context(CA)) as response,
    ):
        return response.status, await response.json()


async def test_the_mutating_route_answers_with_the_suspend_patch(server):
    status, answer = await post(server, MUTATE_JOBS_PATH, review(job()))
    assert status == 200
    assert answer["response"]["allowed"] is True
    assert answer["response"]["patchType"] == "JSONPatch"


async def test_the_job_validation_route_denies_with_the_message(server):
    body = review(job(queue="nope", suspend=True))
    _, answer = await post(server, VALIDATE_JOBS_PATH, body)
    response = answer["response"]
    assert response["uid"] == body["request"]["uid"] and response["allowed"] is False
    assert response["status"]["code"] == 422
    assert "LocalQueue 'nope' does not exist" in response["status"]["message"]


async def test_the_resource_validation_route_checks_admitter_objects(server):
    _, answer = await post(server, VALIDATE_RESOURCES_PATH, review(topology("t")))
    assert answer["response"]["allowed"] is False
    assert "spec.levels" in answer["response"]["status"]["message"]


async def test_a_body_that_is_not_a_review_gets_400(server):
    status, answer = await post(server, VALIDATE_JOBS_PATH, {"hello": "world"})
    assert status == 400 and "AdmissionReview" in answer["error"]


async def test_healthz_answers_over_tls(server):
    async with (
        aiohttp.ClientSession() as session,
        session.get(server + HEALTH_PATH, ssl=client_context(CA)) as response,
    ):
        assert response.status == 200 and await response.text() == "ok"


async def answer_when_lookups_raise(tmp_path: Path, error: Exception) -> dict:
    """The server's answer to a Job review while every LocalQueue lookup raises `error`."""
    class Failing(FakeLookup):
        async def local_queues(self, namespace, fresh=False):
            raise error

    install_cert(tmp_path, "first")
    runner, port = await serve(tmp_path, Failing())
    try:
        _, answer = await post(f"https://127.0.0.1:{port}", VALIDATE_JOBS_PATH, review(job()))
    finally:
        await runner.cleanup()
    return answer


@pytest.mark.parametrize(
    "error, code, said",
    [
        # The cluster is unreachable: admitter's failure, so a 500 that says to retry.
        (ConnectionError("API server unreachable"), 500, "API server unreachable); retry later"),
        # Input no rule foresaw: the object's fault, so a denial naming it, never a 500.
        (ValueError("'1e30' is out of range"), 422,
         "Job team-a/train: admitter cannot read this object: '1e30' is out of range"),
    ],
)
async def test_a_handler_failure_is_answered_with_its_reason(tmp_path, error, code, said):
    answer = await answer_when_lookups_raise(tmp_path, error)
    status = answer["response"]["status"]
    assert status["code"] == code and said in status["message"]


@pytest.mark.parametrize("error", [
    ConnectionError("API server unreachable"),
    aiohttp.ServerDisconnectedError(),
    aiohttp.ClientPayloadError("Response payload is not completed: <TransferEncodingError>"),
], ids=lambda error: type(error).__name__)
async def test_a_network_failure_is_logged_in_one_line_without_traceback(tmp_path, error,
                                                                         caplog):
    with caplog.at_level("INFO", logger="admitter.webhook.server"):
        await answer_when_lookups_raise(tmp_path, error)
    [record] = [r for r in caplog.records if r.name == "admitter.webhook.server"]
    assert record.exc_info is None
    assert type(error).__name__ in record.getMessage()
    assert "Job team-a/train" in record.getMessage()


async def test_a_decision_the_cluster_is_too_slow_for_is_denied_in_time(tmp_path):
    """Fail closed with the reason, before the API server's own timeoutSeconds."""

    class Hanging(FakeLookup):
        async def local_queues(self, namespace, fresh=False):
            await asyncio.Event().wait()

    install_cert(tmp_path, "first")
    runner = await start_webhook_server(Settings(), Hanging(), tmp_path, 0, host="127.0.0.1",
                                        decision_timeout=0.2)
    try:
        port = runner.addresses[0][1]
        _, answer = await post(f"https://127.0.0.1:{port}", VALIDATE_JOBS_PATH, review(job()))
    finally:
        await runner.cleanup()
    response = answer["response"]
    assert response["allowed"] is False and response["status"]["code"] == 504
    assert "admitter could not check Job team-a/train in time" in response["status"]["message"]


async def served_common_name(port: int, context: ssl.SSLContext) -> str:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        subject = writer.get_extra_info("peercert")["subject"]
    finally:
        writer.close()
        await writer.wait_closed()
    return dict(pair[0] for pair in subject)["commonName"]


async def test_a_rotated_certificate_is_served_to_the_next_connection(tmp_path):
    install_cert(tmp_path, "first")
    runner, port = await serve(tmp_path, FakeLookup())
    new_ca = pki.new_ca("rotated-ca")
    both = client_context(CA, new_ca)
    try:
        assert await served_common_name(port, both) == "first"
        install_cert(tmp_path, "second", new_ca)
        assert await served_common_name(port, both) == "second"
        assert await served_common_name(port, client_context(new_ca)) == "second"
        with pytest.raises(ssl.SSLCertVerificationError):
            await served_common_name(port, client_context(CA))
    finally:
        await runner.cleanup()


async def test_a_half_written_pair_keeps_the_previous_certificate(tmp_path):
    install_cert(tmp_path, "first")
    runner, port = await serve(tmp_path, FakeLookup())
    context = client_context(CA)
    try:
        next_pair = pki.serving_cert(CA, "second", ["127.0.0.1"])
        pki.write_pem(tmp_path / CERT_FILE, next_pair.cert_pem)  # the key is not written yet
        assert await served_common_name(port, context) == "first"
        pki.write_pem(tmp_path / KEY_FILE, next_pair.key_pem, private=True)
        assert await served_common_name(port, context) == "second"
    finally:
        await runner.cleanup()
