"""Entry point: ``python -m node_maintenance``.

Every replica serves the webhooks and probes; only the Lease holder migrates storage and reconciles.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

import kopf

from . import handlers  # noqa: F401  (importing it registers the kopf handlers)
from . import logs
from .health import Health
from .kube import Kube, load_api_client
from .leader import LeaderElector
from .storage_migration import hub_served, migrate_storage_version
from .webhook_server import start_webhook_server

log = logging.getLogger("node_maintenance")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="node-maintenance-operator", description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE", "node-maintenance-operator"),
                        help="namespace of the leader-election Lease (default: $POD_NAMESPACE)")
    parser.add_argument("--bind-address", default="0.0.0.0", help="address the webhook and health servers listen on")
    parser.add_argument("--webhook-port", type=int, default=9443)
    parser.add_argument("--webhook-cert-dir", type=Path, default=Path("/tmp/k8s-webhook-server/serving-certs"),
                        help="directory with tls.crt and tls.key (reloaded when they change)")
    parser.add_argument("--health-port", type=int, default=8081, help="/healthz, /readyz and /metrics")
    parser.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--leader-elect-identity", default=None, help="Lease holder identity (default: the hostname, i.e. the pod name)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> int:
    shutdown = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, shutdown.set)
    kube = Kube(load_api_client())
    health = Health()
    runners = [await health.start(args.bind_address, args.health_port)]
    try:
        if (args.webhook_cert_dir / "tls.crt").exists():
            runners.append(await start_webhook_server(host=args.bind_address, port=args.webhook_port,
                                                      cert_dir=args.webhook_cert_dir, kube=kube))
        else:  # releases without webhooks get no certificate mounted
            log.warning("no webhook certificate; webhooks not served", extra={"certDir": str(args.webhook_cert_dir)})
        health.ready = True
        if not await _until_hub_served(kube, shutdown):
            return 0
        elector = LeaderElector(kube, args.namespace, args.leader_elect_identity) if args.leader_elect else None
        if elector:
            acquiring = asyncio.create_task(elector.acquire())
            stopping = asyncio.create_task(shutdown.wait())
            await asyncio.wait([acquiring, stopping], return_when=asyncio.FIRST_COMPLETED)
            if shutdown.is_set():
                acquiring.cancel()
                return 0
            stopping.cancel()
        rewritten = await asyncio.to_thread(migrate_storage_version, kube)
        log.info("storage version is v1beta1", extra={"rewritten": rewritten})
        stop = asyncio.Event()
        operator = asyncio.create_task(
            kopf.operator(clusterwide=True, standalone=True, stop_flag=stop, memo=kopf.Memo(kube=kube))
        )
        holding = asyncio.create_task(elector.hold()) if elector else asyncio.create_task(asyncio.Event().wait())
        stopping = asyncio.create_task(shutdown.wait())
        done, _ = await asyncio.wait([operator, holding, stopping], return_when=asyncio.FIRST_COMPLETED)
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(operator, 10)
        holding.cancel()
        if elector and stopping in done:
            await asyncio.to_thread(elector.release)
        # Leadership lost: exit non-zero so the pod restarts and competes again.
        return 1 if holding in done else 0
    finally:
        for runner in runners:
            await runner.cleanup()


async def _until_hub_served(kube: Kube, shutdown: asyncio.Event) -> bool:
    """Serve only the webhooks until the CRD serves v1beta1; False if asked to stop meanwhile."""
    warned = False
    while not await asyncio.to_thread(hub_served, kube):
        if not warned:
            log.warning("the installed CRD does not serve v1beta1 yet: serving webhooks only until it does")
            warned = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(shutdown.wait(), 2)
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure(args.log_level)
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
