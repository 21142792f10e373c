"""A server TLS context that follows its certificate files, so rotation needs no restart.

Every TLS handshake calls the context's SNI callback (with or without a server name); there the
certificate files' identity (inode, size, mtime) is compared with what was last loaded, and on
change a fresh context is loaded and swapped into the connection. A Secret volume update (an
atomic symlink swap) or `admitter certs --out` over the same directory is seen by the next new
connection. A half-written pair fails to load and the previous certificate stays in use.
"""

from __future__ import annotations

import logging
import os
import ssl
from pathlib import Path

from admitter.kube.names import CERT_FILE, KEY_FILE

log = logging.getLogger(__name__)

_Stamp = tuple[tuple[int, int, int], ...]


class ReloadingCertificate:
    """Owns `context`, the listening socket's SSLContext; serve with it."""

    def __init__(self, cert_dir: Path) -> None:
        self._files = (cert_dir / CERT_FILE, cert_dir / KEY_FILE)
        self._stamp = self._read_stamp()
        self.context = self._load()
        self.context.sni_callback = self._on_client_hello
        self._current = self.context

    def current(self) -> ssl.SSLContext:
        """The context of the files on disk now, reloading them if they changed."""
        try:
            stamp = self._read_stamp()
            if stamp != self._stamp:
                self._current = self._load()
                self._stamp = stamp
                log.info("loaded the rotated webhook certificate from %s", self._files[0])
        except (OSError, ssl.SSLError) as error:
            log.warning("keeping the previous webhook certificate: %s", error)
        return self._current

    def _on_client_hello(
        self,
        connection: ssl.SSLObject | ssl.SSLSocket,
        server_name: str | None,
        context: ssl.SSLContext,
    ) -> None:
        connection.context = self.current()

    def _read_stamp(self) -> _Stamp:
        stats = [os.stat(path) for path in self._files]
        return tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)

    def _load(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*self._files)
        return context
