"""Serving certificates for the webhooks (and the secured metrics): read from files (where OLM mounts them),
reloaded when rotated."""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

from aiohttp import web

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
log = logging.getLogger(__name__)


class ReloadingTLS:
    """An SSLContext whose certificate chain follows the files on disk.

    New TLS handshakes use whatever pair was loaded last; connections already open are unaffected,
    so rotating certificates drops no request.
    """

    def __init__(self, cert_dir: Path) -> None:
        self.cert_dir = cert_dir
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp: tuple[float, float] | None = None
        self.reload()

    def _current_stamp(self) -> tuple[float, float]:
        return ((self.cert_dir / CERT_FILE).stat().st_mtime, (self.cert_dir / KEY_FILE).stat().st_mtime)

    def reload(self) -> bool:
        """Load the pair if it changed since the last load; return whether it did."""
        stamp = self._current_stamp()
        if stamp == self._stamp:
            return False
        self.context.load_cert_chain(self.cert_dir / CERT_FILE, self.cert_dir / KEY_FILE)
        self._stamp = stamp
        return True

    async def watch(self, interval: float = 5.0) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                if self.reload():
                    log.info("reloaded webhook serving certificate", extra={"certDir": str(self.cert_dir)})
            except (OSError, ssl.SSLError) as error:
                # Mid-rotation the pair can be briefly inconsistent; keep serving the last good one.
                log.warning("webhook certificate not reloaded yet: %s", error)


async def serve(app: web.Application, host: str, port: int, cert_dir: Path) -> web.AppRunner:
    """Serve ``app`` over TLS on ``host:port`` with the pair in ``cert_dir``, followed as it rotates."""
    tls = ReloadingTLS(cert_dir)
    watcher = asyncio.get_running_loop().create_task(tls.watch())

    async def stop_watching(_: web.Application) -> None:
        watcher.cancel()

    app.on_cleanup.append(stop_watching)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=tls.context).start()
    return runner
