"""Kubeconfigs read by the official client's loader (``kubernetes.config``), as kubectl reads them.

The loader merges the files of ``KUBECONFIG``, picks the context, resolves paths against the file that
names them, writes inline certificates to files, and reads the cluster (server with its path, CA,
``insecure-skip-tls-verify``, ``tls-server-name``, ``proxy-url``) and the user (token, token file, client
certificate, basic auth, auth providers). Two things it does differently from kubectl are set right
here: the first file that sets ``current-context`` wins (the loader lets the last one win), and exec
plugins run through :mod:`node_maintenance.client.exec_plugin`.

Importing the official client costs about 40 MiB, so only a process with a kubeconfig loads it.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import FileOrData, KubeConfigLoader, KubeConfigMerger

from node_maintenance.client.credentials import Credentials, Impersonation, proxy_for
from node_maintenance.client.errors import ConfigError
from node_maintenance.client.exec_plugin import ExecPlugin

BEARER = "BearerToken"  # where the loader puts the Authorization header's value


class _Loader(KubeConfigLoader):  # type: ignore[misc]  # untyped: see pyproject's mypy section
    """The official loader, with exec plugins left to :class:`ExecPlugin` (created, not run, here)."""

    plugin: ExecPlugin | None = None

    def _load_from_exec_plugin(self) -> bool | None:
        if "exec" not in self._user:
            return None
        cluster = self._cluster.value if self._cluster is not None else {}
        name = self._current_context["context"].safe_get("user")
        self.plugin = ExecPlugin(str(name), self._user["exec"].value, self._get_base_path(self._user.path), cluster)
        return True

    def cluster(self) -> dict[str, Any]:
        return dict(self._cluster.value)

    def user(self) -> dict[str, Any]:
        return dict(self._user.value) if self._user is not None else {}


def _current_context(merged: KubeConfigMerger) -> str | None:
    """kubectl's rule: the first file that sets a current context wins."""
    for path in merged.paths:
        if chosen := (merged.config_files[path] or {}).get("current-context"):
            return str(chosen)
    return None


def load(paths: str, context: str | None, impersonation: Impersonation | None) -> Credentials:
    """The credentials of ``context`` (else the current one) in the kubeconfig files ``paths``."""
    try:
        merged = KubeConfigMerger(paths)
        if merged.config is None:
            raise ConfigError(f"no kubeconfig file at {paths}; set KUBECONFIG or pass --kubeconfig naming one")
        loader = _Loader(config_dict=merged.config, active_context=context or _current_context(merged), config_base_path=None)
        configuration = Configuration()
        loader.load_and_set(configuration)
    except ConfigException as error:
        raise ConfigError(f"kubeconfig {paths}: {error}; fix it, or pick another --context or --kubeconfig") from None
    except (OSError, ValueError) as error:  # unreadable, not YAML, a path or certificate that is not there
        raise ConfigError(f"kubeconfig {paths}: {error}; fix it, or pass --kubeconfig naming a readable one") from None
    cluster, user = loader.cluster(), loader.user()
    if not cluster.get("server"):
        raise ConfigError(f"kubeconfig {paths}: the context's cluster has no server; add its server URL")
    server = str(cluster["server"]).rstrip("/")
    cert_file, key_file = configuration.cert_file, configuration.key_file
    plugin = loader.plugin
    if plugin is not None:
        credential = plugin.credential()  # the first run, so that a plugin that fails says so now
        if credential.cert_data:  # a client certificate is read into the TLS context once, when a client starts
            cert_file = FileOrData({"pem": credential.cert_data}, None, "pem", base64_file_content=False).as_file()
            key_file = FileOrData({"pem": credential.key_data}, None, "pem", base64_file_content=False).as_file()
        authorization, expires = plugin.authorization, (lambda: plugin.credential().expires)
    elif configuration.api_key.get(BEARER):
        # Stripped, as kubectl strips a token file's content; the hook refreshes an auth provider's token.
        authorization, expires = (lambda: (configuration.get_api_key_with_prefix(BEARER) or "").strip() or None), (lambda: None)
    else:
        authorization, expires = (lambda: None), (lambda: None)
    as_user = user.get("as")
    return Credentials(
        server, authorization=authorization, expires=expires, ca_file=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl, cert_file=cert_file, key_file=key_file,
        tls_server_name=cluster.get("tls-server-name"), proxy=proxy_for(server, cluster.get("proxy-url")),
        impersonation=impersonation or Impersonation(as_user, tuple(user.get("as-groups") or ())),
    )
