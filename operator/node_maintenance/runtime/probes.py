"""Liveness and readiness over plain HTTP, for the kubelet's probes; and /metrics there too for the releases whose
bundles scrape it so (since 0.6.0 it is served over HTTPS to whom may read it: :mod:`metrics_endpoint`)."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest


class Health:
    """Ready once the webhooks serve: every replica answers them, leader or not."""

    def __init__(self, metrics: bool = True) -> None:
        self.ready = False
        self.metrics = metrics

    def app(self) -> web.Application:
        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def readyz(_: web.Request) -> web.Response:
            return web.Response(text="ok") if self.ready else web.Response(status=503, text="starting")

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        if self.metrics:
            app.router.add_get("/metrics", metrics)
        return app

    async def start(self, host: str, port: int) -> web.AppRunner:
        runner = web.AppRunner(self.app(), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        return runner
