"""A kubeconfig user's exec credential plugin, run as kubectl runs it.

The official client's loader runs the plugin too, but it decides interactivity from standard output
instead of the plugin's ``interactiveMode``, and it runs the plugin again for any credential that
expires within five minutes, which is every request for a short-lived token. This runner keeps
kubectl's rules: one run per credential lifetime (until ``expirationTimestamp``, or for the process
when there is none), standard input handed over only when ``interactiveMode`` allows it, and the
plugin's ``installHint`` when its command is missing.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.client.errors import ConfigError

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
# What a plugin may learn of its cluster when it asks (provideClusterInfo), in the ExecCredential's words.
_CLUSTER_KEYS = ("server", "tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression")


@dataclass(frozen=True)
class ExecCredential:
    """What one run of the plugin gave."""

    token: str | None
    cert_data: str | None  # PEM
    key_data: str | None  # PEM
    expires: datetime | None  # None: valid for as long as this process runs

    def expired(self, now: datetime) -> bool:
        return self.expires is not None and now >= self.expires


class ExecPlugin:
    """Runs the plugin of one kubeconfig user when no unexpired credential is at hand (thread-safe)."""

    def __init__(self, user: str, spec: dict[str, Any], cwd: str, cluster: dict[str, Any]) -> None:
        self.user = user
        self.api_version = str(spec.get("apiVersion", ""))
        if self.api_version not in API_VERSIONS:
            raise ConfigError(f"user {user!r}: exec.apiVersion {self.api_version!r} is not one kubectl runs; "
                              f"set it to {' or '.join(API_VERSIONS)}")
        if not spec.get("command"):
            raise ConfigError(f"user {user!r}: exec.command is empty; name the plugin's command")
        # kubectl requires the mode from v1 on and assumes IfAvailable before it.
        self.mode = spec.get("interactiveMode") or ("" if self.api_version.endswith("/v1") else "IfAvailable")
        if self.mode not in INTERACTIVE_MODES:
            raise ConfigError(f"user {user!r}: exec.interactiveMode {self.mode!r} is not valid for {self.api_version}; "
                              f"set it to one of {', '.join(INTERACTIVE_MODES)}")
        self.argv = [str(spec["command"]), *map(str, spec.get("args") or [])]
        self.env = {str(e["name"]): str(e["value"]) for e in spec.get("env") or []}
        self.install_hint = str(spec.get("installHint") or "")
        self.cluster = _cluster_info(cluster, Path(cwd)) if spec.get("provideClusterInfo") else None
        self.cwd = cwd or None
        self._lock = threading.Lock()
        self._credential: ExecCredential | None = None

    def credential(self) -> ExecCredential:
        """The cached credential while it is valid, else a fresh one from the plugin."""
        with self._lock:
            if self._credential is None or self._credential.expired(timestamps.now()):
                self._credential = self._run()
            return self._credential

    def authorization(self) -> str | None:
        token = self.credential().token
        return f"Bearer {token}" if token else None

    def _run(self) -> ExecCredential:
        interactive = self.mode != "Never" and sys.stdin.isatty()
        if self.mode == "Always" and not interactive:
            raise ConfigError(f"user {self.user!r}: the exec plugin needs a terminal (interactiveMode: Always) and "
                              "standard input is not one; run the command from a terminal")
        info: dict[str, Any] = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": {"interactive": interactive}}
        if self.cluster is not None:
            info["spec"]["cluster"] = self.cluster
        try:
            done = subprocess.run(self.argv, env={**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)},
                                  cwd=self.cwd, stdin=None if interactive else subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, check=False)
        except OSError as error:
            hint = f"; {self.install_hint.strip()}" if self.install_hint else ""
            raise ConfigError(f"user {self.user!r}: cannot run the exec plugin {self.argv[0]!r} ({error}){hint}") from None
        if done.returncode != 0:
            raise ConfigError(f"user {self.user!r}: the exec plugin {self.argv[0]!r} exited with {done.returncode}; "
                              "its messages are above, log in again as they say")
        return self._credential_of(done.stdout)

    def _credential_of(self, output: bytes) -> ExecCredential:
        try:
            answer = json.loads(output)
            status = answer["status"]
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"user {self.user!r}: the exec plugin {self.argv[0]!r} printed no ExecCredential with a "
                              "status; fix the plugin") from None
        if answer.get("apiVersion") != self.api_version or answer.get("kind") != "ExecCredential":
            raise ConfigError(f"user {self.user!r}: the exec plugin answered {answer.get('kind')} "
                              f"{answer.get('apiVersion')}; it must answer ExecCredential {self.api_version}")
        token, cert, key = status.get("token"), status.get("clientCertificateData"), status.get("clientKeyData")
        if not token and not (cert and key):
            raise ConfigError(f"user {self.user!r}: the exec plugin's ExecCredential has neither a token nor a client "
                              "certificate with its key; fix the plugin")
        expires = status.get("expirationTimestamp")
        return ExecCredential(token or None, cert or None, key or None, timestamps.parse(expires) if expires else None)


def _cluster_info(cluster: dict[str, Any], base: Path) -> dict[str, Any]:
    """The cluster as the ExecCredential describes it: the CA travels as data, as kubectl sends it (a path
    is relative to the kubeconfig that names it)."""
    info = {key: cluster[key] for key in _CLUSTER_KEYS if key in cluster}
    if cluster.get("certificate-authority-data"):
        info["certificate-authority-data"] = cluster["certificate-authority-data"]
    elif cluster.get("certificate-authority"):
        info["certificate-authority-data"] = base64.b64encode((base / cluster["certificate-authority"]).read_bytes()).decode()
    return info
