"""Where the API server is and how this process proves who it is (:class:`~node_maintenance.client.credentials.Credentials`):
a kubeconfig, read by the official client's loader with kubectl's semantics (:mod:`node_maintenance.client.kubeconfig`),
or the pod's ServiceAccount."""

from __future__ import annotations

import os
import time
from importlib import metadata
from pathlib import Path

from node_maintenance.client.credentials import Credentials, Impersonation, proxy_for
from node_maintenance.client.errors import ConfigError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG = "~/.kube/config"
TOKEN_RELOAD_SECONDS = 60.0  # as client-go's cached file token source
PRODUCT = "node-maintenance-operator"  # the distribution's name (pyproject.toml)


def user_agent(identity: str) -> str:
    """The User-Agent of a replica's every request, by which the API server's audit log tells replicas apart:
    the product, the installed distribution's version (releases.yaml's, through setup.py) and ``identity``."""
    return f"{PRODUCT}/{metadata.version(PRODUCT)} ({identity})"


def kubeconfig_paths(kubeconfig: str | None = None, context: str | None = None) -> str | None:
    """The kubeconfig files that apply, as kubectl picks them: the one named, else $KUBECONFIG's list,
    else ~/.kube/config; None when none exists and none was asked for (then the pod's ServiceAccount)."""
    paths = kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    exists = any(Path(p).expanduser().exists() for p in paths.split(os.pathsep) if p)
    return paths if kubeconfig or context or exists else None


def load_credentials(kubeconfig_path: str | None = None, context: str | None = None,
                     impersonation: Impersonation | None = None) -> Credentials:
    """The credentials of the kubeconfig that applies; without one, the pod's ServiceAccount."""
    if (paths := kubeconfig_paths(kubeconfig_path, context)) is not None:
        from node_maintenance.client import kubeconfig  # the official client: only outside a pod

        return kubeconfig.load(paths, context, impersonation)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        return Credentials(server, authorization=ServiceAccountToken(SERVICE_ACCOUNT_DIR / "token"), ca_file=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
                           proxy=proxy_for(server, None), impersonation=impersonation or Impersonation())
    raise ConfigError(f"no kubeconfig at {kubeconfig_path or os.environ.get('KUBECONFIG') or DEFAULT_KUBECONFIG} and not in a pod; "
                      "set KUBECONFIG or pass --kubeconfig")


class ServiceAccountToken:
    """The pod's ServiceAccount token as an Authorization header. The kubelet rotates the file in place well before
    the token expires; like client-go's cached file token source, it is read again once TOKEN_RELOAD_SECONDS have
    passed, not at every request (a read per eviction showed in the drain's profile)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._header: str | None = None
        self._read_at: float | None = None

    def __call__(self) -> str | None:
        if self._read_at is None or time.monotonic() - self._read_at >= TOKEN_RELOAD_SECONDS:
            try:
                token = self.path.read_text().strip()
            except OSError as error:
                raise ConfigError(f"cannot read the ServiceAccount token ({error}); mount the pod's ServiceAccount token") from None
            self._header, self._read_at = (f"Bearer {token}" if token else None), time.monotonic()
        return self._header


