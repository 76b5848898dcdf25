"""The webhook serving certificate issued, rotated and injected by the operator itself (``--manage-certs``): for installs
by the Helm chart, where neither OLM nor cert-manager provides one.

Every replica does the same, and they agree through the Secret: each reads it, issues only what is due
(:mod:`.cert_rules`), and writes it with the resourceVersion it read, so that of two replicas renewing at once one
wins and the other takes the winner's pair. Each then puts the Secret's CA certificates into the caBundle of the
webhooks that call its Service, and the pair into the directory its TLS servers reload from (:mod:`.certs`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

from node_maintenance.api import timestamps
from node_maintenance.api.paths import NODE_MAINTENANCE_CRD, POLICY_CRD, secret_path, validating_webhook_configuration_path
from node_maintenance.client.errors import Conflict, KubeError, NotFound
from node_maintenance.client.protocol import BlockingKubeApi
from node_maintenance.webhooks import cert_rules
from node_maintenance.webhooks.certs import CERT_FILE, KEY_FILE

DEFAULT_SECRET = "node-maintenance-operator-webhook-cert"
DEFAULT_SERVICE = "node-maintenance-operator-service"
DEFAULT_CONFIGURATIONS = ("node-maintenance-operator",)  # the chart's ValidatingWebhookConfiguration
# How often the Secret and the caBundles are looked at even when nothing is due: a pair another replica renewed, or a
# caBundle someone else overwrote (a `helm upgrade --force`, a GitOps tool that replaces objects), is taken up within this.
RECHECK = datetime.timedelta(minutes=5)
# How soon a webhook configuration named but not there yet is looked for again: the chart creates it after the
# Deployment, and until its webhooks carry the CA the API server cannot call them.
MISSING_RECHECK = datetime.timedelta(seconds=2)
# The pause before trying again after a failure (the API server out of reach, a write refused).
RETRY_SECONDS = 5.0
# Writes tried on conflicts with other replicas (or other writers) before the last conflict is raised.
ROUNDS = 3
log = logging.getLogger(__name__)
T = TypeVar("T")


def service_names(service: str, namespace: str) -> tuple[str, ...]:
    """The DNS names the API server may call the Service by: ``.svc``, as a webhook's clientConfig makes it, and the
    cluster domain's full name, for clients that use it."""
    return f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The mode's flags, defined beside it (the process's parser, ``runtime.main``, names them with its own)."""
    # Off by default: OLM mounts the pair it made for the CSV's webhookdefinitions, and so do installs with cert-manager.
    parser.add_argument("--manage-certs", action=argparse.BooleanOptionalAction, default=False,
                        help="issue, rotate and inject the webhook serving certificate itself, for installs without OLM and "
                             "without cert-manager; the pair is kept in --cert-secret and written into --webhook-cert-dir")
    parser.add_argument("--cert-secret", default=DEFAULT_SECRET,
                        help="with --manage-certs: the Secret, in --namespace, that keeps the CA and the serving pair")
    parser.add_argument("--webhook-service", default=DEFAULT_SERVICE,
                        help="with --manage-certs: the Service, in --namespace, the webhooks call: the certificate names it, "
                             "and only webhooks that call it get the CA")
    parser.add_argument("--webhook-configuration", action="append",
                        help="with --manage-certs: a ValidatingWebhookConfiguration whose webhooks that call --webhook-service "
                             f"get the CA (repeatable; default: {', '.join(DEFAULT_CONFIGURATIONS)})")


def with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with the configurations' default when none was named: argparse would append to a default list."""
    args.webhook_configuration = args.webhook_configuration or list(DEFAULT_CONFIGURATIONS)
    return args


async def started(kube: BlockingKubeApi, args: argparse.Namespace, stopping: asyncio.Event) -> asyncio.Task[None] | None:
    """The mode, as ``args`` (of :func:`add_arguments` and the webhooks' flags) ask: the pair ensured in
    ``--webhook-cert-dir`` (made if missing), then a task that keeps it; None if ``stopping`` is set first."""
    args.webhook_cert_dir.mkdir(parents=True, exist_ok=True)
    certificates = OwnCertificates(kube, args.namespace, args.cert_secret, args.webhook_service, tuple(args.webhook_configuration),
                                   args.webhook_cert_dir)
    if not await certificates.first(stopping):
        return None
    return asyncio.create_task(certificates.keep(), name="webhook-certificate")


class OwnCertificates:
    """The serving pair of one replica, kept in Secret ``secret`` of ``namespace``, served from ``cert_dir``, and
    trusted by the webhooks of ``configurations`` (ValidatingWebhookConfigurations) and the conversion webhooks of our
    CRDs that call ``service``."""

    def __init__(self, kube: BlockingKubeApi, namespace: str, secret: str, service: str, configurations: tuple[str, ...],
                 cert_dir: Path, clock: Callable[[], datetime.datetime] = timestamps.now) -> None:
        self.kube = kube
        self.namespace = namespace
        self.secret = secret
        self.service = service
        self.configurations = configurations
        self.cert_dir = cert_dir
        self.clock = clock
        self.names = service_names(service, namespace)
        self.due = clock()  # when ensure should run next: at once, until it has run

    def ensure(self) -> datetime.datetime:
        """Make the Secret hold a pair good for now, trusted by the webhooks, and served from ``cert_dir``; return when to
        look again. Blocking: run it in a thread.

        The caBundles come before the files: after a CA rotation the API server trusts the new CA before this replica
        serves a certificate from it (and still trusts the old one, which the other replicas serve until they look).
        """
        bundle = self._settled()
        missing = [configuration for configuration in self.configurations if not self._inject_webhooks(configuration, bundle.ca_certs)]
        for crd in (NODE_MAINTENANCE_CRD, POLICY_CRD):
            self._inject_conversion(crd, bundle.ca_certs)
        self._write_files(bundle)
        return min(cert_rules.next_renewal(bundle), self.clock() + (MISSING_RECHECK if missing else RECHECK))

    async def first(self, stopping: asyncio.Event) -> bool:
        """Ensure the pair until it succeeds, before the TLS servers start (they need its files); False if ``stopping`` is
        set first."""
        while not await self._attempt():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RETRY_SECONDS):
                    await stopping.wait()
            if stopping.is_set():
                return False
        return True

    async def keep(self) -> None:
        """Ensure the pair whenever it is due, for ever (until cancelled)."""
        while True:
            await asyncio.sleep(max(0.0, (self.due - self.clock()).total_seconds()))
            await self._attempt()

    async def _attempt(self) -> bool:
        """One ensure, in a thread; on a failure it is due again after ``RETRY_SECONDS``. Any failure: a certificate left
        to expire because its keeper died of an error nobody foresaw would take every webhook down with it."""
        try:
            self.due = await asyncio.to_thread(self.ensure)
        except (KubeError, OSError) as error:
            log.warning("managing the webhook certificate failed; retrying: %s: %s", type(error).__name__, error,
                        extra={"secret": self.secret, "certDir": str(self.cert_dir)})
        except Exception:
            log.exception("managing the webhook certificate failed; retrying", extra={"secret": self.secret, "certDir": str(self.cert_dir)})
        else:
            return True
        self.due = self.clock() + datetime.timedelta(seconds=RETRY_SECONDS)
        return False

    def _settled(self) -> cert_rules.Bundle:
        """The Secret's bundle, with what is due issued and written first."""
        return _on_fresh_state(self._settle)

    def _settle(self) -> cert_rules.Bundle:
        """One read of the Secret, and the write of what is due: the create, or the update carrying the resourceVersion
        read (a compare-and-swap), conflicts if another replica wrote it meanwhile."""
        path = secret_path(self.namespace, self.secret)
        stored = self.kube.get(path)
        needed, bundle = cert_rules.renewed(cert_rules.read(stored.get("data") if stored else None), self.names, self.clock())
        if needed is cert_rules.Due.NOTHING:
            return bundle
        if stored is None:
            self.kube.request("POST", secret_path(self.namespace), body=self._new_secret(bundle))
        else:  # a Secret's type is immutable: the one it has is kept
            self.kube.request("PUT", path, body={**stored, "data": bundle.secret_data()})
        log.info("issued the webhook certificate", extra={"secret": self.secret, "issued": needed.value})
        return bundle

    def _new_secret(self, bundle: cert_rules.Bundle) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": self.secret, "namespace": self.namespace},
                "type": cert_rules.SECRET_TYPE, "data": bundle.secret_data()}

    def _calls_us(self, client_config: Any) -> TypeGuard[dict[str, Any]]:
        """Whether a webhook's clientConfig calls our Service (not a URL, nor another Service)."""
        service = client_config.get("service") if isinstance(client_config, dict) else None
        return isinstance(service, dict) and service.get("namespace") == self.namespace and service.get("name") == self.service

    def _inject_webhooks(self, configuration: str, ca_certs: bytes) -> bool:
        """The CA certificates into the caBundle of each webhook of the configuration that calls our Service, beside what
        it trusts that has not expired (``cert_rules.trusted``); whether the configuration exists. The whole list is
        patched, on the resourceVersion read, so that no change made meanwhile is lost. A missing configuration is not
        ours to make."""
        path = validating_webhook_configuration_path(configuration)

        def inject() -> bool:
            found = self.kube.get(path)
            webhooks = (found or {}).get("webhooks") or []
            now = self.clock()
            injected = [{**webhook, "clientConfig": {**webhook["clientConfig"],
                                                     "caBundle": cert_rules.trusted(ca_certs, webhook["clientConfig"].get("caBundle"), now)}}
                        if self._calls_us(webhook.get("clientConfig")) else webhook for webhook in webhooks]
            if found is not None and injected != webhooks:
                try:
                    self.kube.patch(path, {"metadata": {"resourceVersion": found["metadata"]["resourceVersion"]}, "webhooks": injected})
                except NotFound:
                    return False
            return found is not None

        return _on_fresh_state(inject)

    def _inject_conversion(self, crd: str, ca_certs: bytes) -> None:
        """The CA certificates into the CRD's conversion webhook, if it calls our Service, beside what it trusts that has
        not expired; on the resourceVersion read, so that a replica that read an older Secret cannot take away what
        another wrote meanwhile. A missing CRD is skipped."""

        def inject() -> None:
            found = self.kube.get(crd)
            client_config = ((((found or {}).get("spec") or {}).get("conversion") or {}).get("webhook") or {}).get("clientConfig")
            if found is None or not self._calls_us(client_config):
                return
            ca_bundle = cert_rules.trusted(ca_certs, client_config.get("caBundle"), self.clock())
            if client_config.get("caBundle") != ca_bundle:
                with contextlib.suppress(NotFound):
                    self.kube.patch(crd, {"metadata": {"resourceVersion": found["metadata"]["resourceVersion"]},
                                          "spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": ca_bundle}}}}})

        _on_fresh_state(inject)

    def _write_files(self, bundle: cert_rules.Bundle) -> None:
        """The pair into ``cert_dir``, each file only if it changed. Each is written beside its place and renamed into it,
        both renames back to back: the reloader never reads a file half written, and a pair half replaced fails to load
        (its key does not match) and is read again at its next look, the last good pair served meanwhile."""
        wanted = [(self.cert_dir / KEY_FILE, bundle.key, 0o600), (self.cert_dir / CERT_FILE, bundle.cert, 0o644)]
        changed = [(path, content, mode) for path, content, mode in wanted if _content(path) != content]
        staged: list[tuple[str, Path]] = []
        try:
            for path, content, mode in changed:
                handle, temporary = tempfile.mkstemp(dir=self.cert_dir, prefix=f".{path.name}.")
                staged.append((temporary, path))
                with os.fdopen(handle, "wb") as file:
                    os.fchmod(file.fileno(), mode)
                    file.write(content)
            for temporary, path in staged:
                os.replace(temporary, path)
        finally:
            for temporary, _ in staged:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
        if changed:
            log.info("wrote the webhook serving certificate", extra={"certDir": str(self.cert_dir)})


def _on_fresh_state(attempt: Callable[[], T]) -> T:
    """``attempt`` (a read, a decision on it, a write) made again while its write conflicts with another writer's, at most
    ``ROUNDS`` times in all; the last conflict is raised."""
    for _ in range(ROUNDS - 1):
        with contextlib.suppress(Conflict):
            return attempt()
    return attempt()


def _content(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
