"""A tiny synchronous HTTPS client for the few API calls the launcher makes.

The launcher runs outside any event loop (pytest session setup, `hack/local-cluster`), so this
avoids dragging an asyncio client into it; tests use kubernetes_asyncio or kubectl instead.
"""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path
from typing import Any


class ApiError(RuntimeError):
    """A non-2xx answer from a control-plane endpoint."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status = status


class HttpsClient:
    """Talks to one `127.0.0.1:port`, optionally verifying against a CA and presenting a cert."""

    def __init__(
        self,
        port: int,
        ca_file: Path | None = None,
        client_cert: tuple[Path, Path] | None = None,
        timeout: float = 5.0,
    ) -> None:
        self.port = port
        self.timeout = timeout
        if ca_file is None:
            # Component health endpoints serve self-signed certs; they carry no secrets.
            self._context = ssl._create_unverified_context()
        else:
            self._context = ssl.create_default_context(cafile=str(ca_file))
        if client_cert is not None:
            self._context.load_cert_chain(str(client_cert[0]), str(client_cert[1]))

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Send one request and decode the JSON answer (raw text when it is not JSON)."""
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self._context, timeout=self.timeout
        )
        try:
            payload = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            text = response.read().decode()
        finally:
            conn.close()
        if not 200 <= response.status < 300:
            raise ApiError(response.status, text)
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text

    def is_ready(self) -> bool:
        """Whether /readyz answers 2xx right now."""
        return self._ok("/readyz")

    def is_healthy(self) -> bool:
        """Whether /healthz answers 2xx right now."""
        return self._ok("/healthz")

    def _ok(self, path: str) -> bool:
        try:
            self.request("GET", path)
        except (OSError, ApiError):
            return False
        return True
