"""Where the API server is and how this process proves who it is: a kubeconfig read as kubectl reads
it, or the pod's ServiceAccount."""

from __future__ import annotations

import base64
import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(Exception):
    """No usable kubeconfig or ServiceAccount; the message names the file and entry, and the fix."""


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and how this process proves who it is."""

    server: str
    ca_file: str | None = None
    ca_data: str | None = None  # PEM
    insecure: bool = False
    token: str | None = None
    token_file: str | None = None  # read at each use: a ServiceAccount's token is rotated in place
    cert_file: str | None = None
    cert_data: str | None = None  # PEM
    key_file: str | None = None
    key_data: str | None = None  # PEM

    def bearer(self) -> str | None:
        if self.token_file:
            return Path(self.token_file).read_text().strip() or None
        return self.token

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file or self.cert_data:
            with _as_file(self.cert_file, self.cert_data) as cert, _as_file(self.key_file, self.key_data) as key:
                assert cert is not None  # a cert_file or cert_data is set, so there is a path
                context.load_cert_chain(cert, key)
        return context

    def headers(self, content_type: str) -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        if token := self.bearer():
            headers["Authorization"] = f"Bearer {token}"
        return headers


@contextlib.contextmanager
def _as_file(path: str | None, data: str | None) -> Iterator[str | None]:
    """A path for a PEM given inline (the ssl module loads certificates from files only)."""
    if path or not data:
        yield path
        return
    with tempfile.NamedTemporaryFile("w", suffix=".pem") as handle:
        handle.write(data)
        handle.flush()
        yield handle.name


def load_credentials(kubeconfig: str | None = None, context: str | None = None) -> Credentials:
    """The kubeconfig named, else the first file of $KUBECONFIG, else ~/.kube/config, as kubectl reads
    them; without any, the pod's ServiceAccount."""
    path = kubeconfig or next((p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p), "~/.kube/config")
    file = Path(path).expanduser()
    if kubeconfig or context or file.exists():
        return _from_kubeconfig(file, context)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        return Credentials(f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}",
                           ca_file=str(SERVICE_ACCOUNT_DIR / "ca.crt"), token_file=str(SERVICE_ACCOUNT_DIR / "token"))
    raise ConfigError(f"no kubeconfig at {file} and not in a pod; set KUBECONFIG or pass --kubeconfig")


def _from_kubeconfig(file: Path, context: str | None) -> Credentials:
    try:
        config = yaml.safe_load(file.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"cannot read kubeconfig {file} ({error}); set KUBECONFIG or pass --kubeconfig naming a readable one") from None

    def entry(kind: str, name: str | None) -> dict[str, Any]:
        for item in config.get(kind) or []:
            if item.get("name") == name:
                return item.get(kind[:-1]) or {}
        raise ConfigError(f"kubeconfig {file} has no {kind[:-1]} named {name!r}; check its {kind} or pick another context")

    chosen = entry("contexts", context or config.get("current-context"))
    cluster = entry("clusters", chosen.get("cluster"))
    user = entry("users", chosen["user"]) if chosen.get("user") else {}
    for plugin in ("exec", "auth-provider"):
        if plugin in user:
            raise ConfigError(f"kubeconfig {file}: user {chosen['user']!r} logs in through an {plugin} plugin, which is not "
                              "supported; use a token or a client certificate")
    if not cluster.get("server"):
        raise ConfigError(f"kubeconfig {file}: cluster {chosen.get('cluster')!r} has no server")

    def path(section: dict[str, Any], key: str) -> str | None:
        return str(file.parent / Path(section[key]).expanduser()) if section.get(key) else None  # relative to the file

    def pem(section: dict[str, Any], key: str) -> str | None:
        return base64.b64decode(section[key]).decode() if section.get(key) else None

    return Credentials(cluster["server"], ca_file=path(cluster, "certificate-authority"), ca_data=pem(cluster, "certificate-authority-data"),
                       insecure=bool(cluster.get("insecure-skip-tls-verify")), token=user.get("token"), token_file=path(user, "tokenFile"),
                       cert_file=path(user, "client-certificate"), cert_data=pem(user, "client-certificate-data"),
                       key_file=path(user, "client-key"), key_data=pem(user, "client-key-data"))
