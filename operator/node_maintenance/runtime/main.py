"""The operator's process: webhooks and probes on every replica; storage migration and the reconciler on the leader.

Every replica serves the webhooks and probes; only the Lease holder migrates storage and reconciles,
in v1beta1 when the installed CRD serves it, else in v1alpha1 (served by every release) until it does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import kopf

from node_maintenance.api import HUB
from node_maintenance.client.async_http import AsyncKube
from node_maintenance.client.config import load_credentials, user_agent
from node_maintenance.client.errors import KubeError, Unreachable
from node_maintenance.client.http import Kube
from node_maintenance.coordination import remediation
from node_maintenance.runtime import handlers, logs, metrics_endpoint
from node_maintenance.runtime.budget_watch import BudgetWatch
from node_maintenance.runtime.cordoned import CordonedNodes
from node_maintenance.runtime.engine import Shared
from node_maintenance.runtime.leader import LeaderElector
from node_maintenance.runtime.maintenances import Maintenances
from node_maintenance.runtime.metrics import Active
from node_maintenance.runtime.policies.view import Policies
from node_maintenance.runtime.probes import Health
from node_maintenance.runtime.storage import migrate_storage_version, read_crd, storage_version, working_version
from node_maintenance.webhooks import own_certs
from node_maintenance.webhooks.certs import CERT_FILE
from node_maintenance.webhooks.server import start_webhook_server

log = logging.getLogger("node_maintenance")
# How often an operator working in v1alpha1 looks whether the CRD serves v1beta1 yet (one GET of one object).
CRD_CHECK_SECONDS = 5.0
MIGRATION_RETRY_SECONDS = 5.0
# How long the reconciler is given to stop on a shutdown or an upgrade of the CRD.
STOP_SECONDS = 15.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="node-maintenance-operator", description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE", "node-maintenance-operator"),
                        help="namespace of the leader-election Lease (default: $POD_NAMESPACE)")
    parser.add_argument("--bind-address", default="0.0.0.0", help="address the webhook and health servers listen on")
    parser.add_argument("--webhook-port", type=int, default=9443)
    parser.add_argument("--webhook-cert-dir", type=Path, default=Path("/tmp/k8s-webhook-server/serving-certs"),
                        help="directory with tls.crt and tls.key (reloaded when they change)")
    parser.add_argument("--health-port", type=int, default=8081, help="/healthz and /readyz (and /metrics without --metrics-port)")
    parser.add_argument("--metrics-port", type=int, default=0,
                        help="serve /metrics here over HTTPS (the webhooks' certificate) to callers whose token the API server "
                             "accepts and whose user may get /metrics; 0 serves it on the health port over HTTP, as the "
                             "bundles of releases before 0.6.0 scrape it")
    parser.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True)
    # In a pod the hostname is the pod name: a restarted container keeps its claim, another replica does not.
    parser.add_argument("--leader-elect-identity", default=socket.gethostname(),
                        help="Lease holder identity, also named in every request's User-Agent (default: the hostname, i.e. the pod name)")
    parser.add_argument("--remediation-lease-namespace",
                        default=os.environ.get(remediation.LEASE_NAMESPACE_ENV, remediation.DEFAULT_LEASE_NAMESPACE),
                        help="namespace of the per-node Leases shared with remediation (medik8s); empty turns the "
                             f"coordination off (default: ${remediation.LEASE_NAMESPACE_ENV}, else %(default)s)")
    # Off by default only because the bundles of earlier releases run this code without the right to ask; every
    # release since 0.6.0 turns it on in its CSV (and the chart), and the docs say to keep it on.
    parser.add_argument("--authorize-authors", action=argparse.BooleanOptionalAction, default=False,
                        help="admit a NodeMaintenance or a policy only if its author may do, themselves, what it asks of the "
                             "operator (asked of the API server with SubjectAccessReviews)")
    # Off by default only because the bundles of earlier releases run this code with Jobs allowed in our namespace
    # alone; every release since 0.6.0 turns it on in its CSV. Off, hook Jobs are watched there, and as no hook Job
    # runs there any longer, a hook's Job is refused by the API server and its maintenance holds, saying so.
    parser.add_argument("--hook-namespaces", action=argparse.BooleanOptionalAction, default=False,
                        help="watch hook Jobs in every namespace, as each runs in the namespace its hook names (needs "
                             "Jobs list and watch cluster-wide)")
    own_certs.add_arguments(parser)
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return own_certs.with_defaults(parser.parse_args(argv))


async def run(args: argparse.Namespace) -> int:
    shutdown = asyncio.Event()
    _on_signals(shutdown)
    # The replica's requests name it, so that the API server's audit log tells replicas apart.
    kube = Kube(dataclasses.replace(load_credentials(), user_agent=user_agent(args.leader_elect_identity)))
    health = Health(metrics=not args.metrics_port)
    runners = [await health.start(args.bind_address, args.health_port)]
    keeping: asyncio.Task[None] | None = None
    try:
        # With --manage-certs the pair is on disk before the TLS servers start (they need it), and kept up to date.
        if args.manage_certs and not (keeping := await own_certs.started(kube, args, shutdown)):
            return 0
        if (args.webhook_cert_dir / CERT_FILE).exists():
            runners.append(await start_webhook_server(host=args.bind_address, port=args.webhook_port,
                                                      cert_dir=args.webhook_cert_dir, kube=kube, authorize=args.authorize_authors,
                                                      namespace=args.namespace))
            if args.metrics_port:
                runners.append(await metrics_endpoint.start(args.bind_address, args.metrics_port, args.webhook_cert_dir, kube))
        else:  # releases without webhooks get no certificate mounted; nor are metrics served in clear instead
            log.warning("no webhook certificate; webhooks not served", extra={"certDir": str(args.webhook_cert_dir)})
        health.ready = True
        if await _until_crd_installed(kube, shutdown) is None:
            return 0
        elector = LeaderElector(kube, args.namespace, args.leader_elect_identity) if args.leader_elect else None
        while True:
            if elector:
                acquiring = asyncio.create_task(elector.acquire())
                stopping = asyncio.create_task(shutdown.wait())
                await asyncio.wait([acquiring, stopping], return_when=asyncio.FIRST_COMPLETED)
                if shutdown.is_set():
                    acquiring.cancel()
                    return 0
                stopping.cancel()
            holding = asyncio.create_task(elector.hold()) if elector else asyncio.create_task(asyncio.Event().wait())
            try:
                lost = await reconcile(kube, holding, shutdown, args.namespace, args.remediation_lease_namespace,
                                       "" if args.hook_namespaces else args.namespace)
                lost_lease = lost and holding.done()
            finally:
                holding.cancel()
            if not lost_lease:
                break
            # The API server was out of reach for longer than the Lease allows (a restart of it, say): the
            # reconciler has stopped, so no other replica is ever raced; compete again in this process.
            log.warning("leadership lost; competing for it again")
        if elector and not lost:
            await asyncio.to_thread(elector.release)
        # The reconciler failed by itself: exit non-zero so the pod restarts.
        return 1 if lost else 0
    finally:
        if keeping:
            keeping.cancel()
            await asyncio.gather(keeping, return_exceptions=True)
        for runner in runners:
            await runner.cleanup()


async def reconcile(kube: Kube, holding: asyncio.Task[Any], shutdown: asyncio.Event, namespace: str,
                     lease_namespace: str, jobs_namespace: str) -> bool:
    """Run kopf in the version the CRD serves best; restart it in v1beta1 once the CRD starts serving it. Hook Jobs are
    watched in ``jobs_namespace`` (empty: every namespace).

    Returns whether leadership was lost (otherwise the process was asked to stop).
    """
    while True:
        crd = await _until_crd_installed(kube, shutdown)  # removed meanwhile, or the API server out of reach: wait
        if crd is None:
            return False
        version = working_version(crd)
        # This run may write while it leads; once it ends for any reason, never again, even if kopf (or the storage
        # migration's thread) takes its time to stop and this process leads again meanwhile.
        leading = threading.Event()
        leading.set()
        if version == HUB and storage_version(crd) == HUB:
            migration = asyncio.create_task(asyncio.to_thread(migrate_storage_version, kube.fenced(leading.is_set)))
            await asyncio.wait([migration, holding], return_when=asyncio.FIRST_COMPLETED)
            if not migration.done():  # the lead is lost: its next write is refused unsent
                leading.clear()
                await asyncio.gather(migration, return_exceptions=True)
                return True
            try:
                rewritten = migration.result()
            except KubeError as error:  # the conversion webhook may still be coming up: try again
                log.warning("storage version migration failed; retrying: %s", error)
                if await _stopped_within(shutdown, MIGRATION_RETRY_SECONDS):
                    return False
                continue
            log.info("storage version is v1beta1", extra={"rewritten": rewritten})
        log.info("reconciling NodeMaintenances", extra={"version": version})
        stop = threading.Event()
        upgraded = asyncio.create_task(_until_hub_served(kube) if version != HUB else asyncio.Event().wait())
        stopping = asyncio.create_task(shutdown.wait())
        operator = asyncio.create_task(asyncio.to_thread(run_kopf, kube, version, stop, namespace, lease_namespace, jobs_namespace,
                                                         leading.is_set))
        done, _ = await asyncio.wait([operator, holding, stopping, upgraded], return_when=asyncio.FIRST_COMPLETED)
        leading.clear()
        stop.set()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(STOP_SECONDS):
                await asyncio.shield(operator)
        for task in (upgraded, stopping):
            task.cancel()
        if upgraded in done and holding not in done and not shutdown.is_set():
            log.info("the CRD serves v1beta1 now: restarting the reconciler in it")
            continue
        if operator in done:  # kopf ended by itself: that is a failure, never a clean stop
            failure = operator.exception()
            log.error("the reconciler stopped: %r", failure, exc_info=failure)
            return True
        return holding in done


def run_kopf(kube: Kube, version: str, stop: threading.Event, namespace: str, lease_namespace: str, jobs_namespace: str,
              leading: Callable[[], bool]) -> None:
    """kopf on an event loop of its own: when it stops it cancels every task of its loop, and the
    webhooks (which must answer during a restart, for the storage migration above all) are not among them."""

    async def operate() -> None:
        akube = AsyncKube(kube.credentials, leading)
        budgets = BudgetWatch(akube)
        told: list[Maintenances] = []  # the policies tell the maintenances, made once the policies are

        def tell(names: Collection[str] | None) -> None:
            for maintenances in told:
                maintenances.tell(names)

        # Policies need the 0.4.0 CRD, which serves v1beta1; their hook Jobs never run in our own namespace.
        policies = Policies(akube, namespace, tell, jobs_namespace) if version == HUB else None
        watching = asyncio.create_task(policies.run(), name="policies") if policies else None
        cordoned = CordonedNodes(akube)
        shared = Shared(akube, budgets, cordoned, Active(), version, handlers.post_event, policies=policies,
                        lease_namespace=lease_namespace)
        maintenances = Maintenances(shared)
        told.append(maintenances)
        memo = handlers.Memo(shared, maintenances)
        engines = asyncio.create_task(maintenances.run(), name="drains")
        try:
            # An explicit identity: kopf would otherwise ask the password database for a user name, and
            # the image's numeric user has no entry there.
            await kopf.operator(registry=handlers.registry(version), clusterwide=True, standalone=True, stop_flag=stop,
                                memo=memo, identity=socket.gethostname())  # type: ignore[arg-type]  # kopf's Identity is a str it does not export
        finally:
            engines.cancel()
            await asyncio.gather(engines, return_exceptions=True)
            if watching:
                watching.cancel()
                await asyncio.gather(watching, return_exceptions=True)
            await budgets.stop()
            await cordoned.stop()
            await akube.close()

    asyncio.run(operate())


def _on_signals(shutdown: asyncio.Event) -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, shutdown.set)


async def _until_crd_installed(kube: Kube, shutdown: asyncio.Event) -> dict[str, Any] | None:
    """Serve only the webhooks until the CRD exists; None if asked to stop meanwhile."""
    warned = False
    while True:
        try:
            crd = await asyncio.to_thread(read_crd, kube)
        except Unreachable as error:
            log.warning("reading the CRD failed; retrying: %s", error)
        else:
            if crd is not None:
                return crd
            if not warned:
                log.warning("the NodeMaintenance CRD is not installed: serving webhooks only until it is")
                warned = True
        if await _stopped_within(shutdown, 2):
            return None


async def _stopped_within(shutdown: asyncio.Event, seconds: float) -> bool:
    """Whether ``shutdown`` is set within ``seconds``: the pause before a retry, which a stop ends at once."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await shutdown.wait()
    return shutdown.is_set()


async def _until_hub_served(kube: Kube) -> None:
    """Return once the CRD serves v1beta1 (an OLM upgrade replaced it while this process runs)."""
    while True:
        await asyncio.sleep(CRD_CHECK_SECONDS)
        with contextlib.suppress(Exception):  # a failed check is tried again at the next tick
            crd = await asyncio.to_thread(read_crd, kube)
            if crd is not None and working_version(crd) == HUB:
                return


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure(args.log_level)
    # What is loaded by now lives as long as the process: the collector's full passes need not walk it. Each
    # walk stalled the event loop for ~50 ms, the p99 of a conversion review of 500 objects (`make bench`).
    gc.freeze()
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
