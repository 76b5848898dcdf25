"""Credentials are read from kubeconfigs as kubectl reads them (the official client's loader), else from
the pod's ServiceAccount."""

from __future__ import annotations

import base64
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from node_maintenance.client.config import TOKEN_RELOAD_SECONDS, load_credentials
from node_maintenance.client.credentials import Credentials, Impersonation
from node_maintenance.client.errors import ConfigError
from node_maintenance.client.http import prepare

SERVER = "https://127.0.0.1:6443"


def _write(path: Path, users: list[dict[str, Any]], clusters: list[dict[str, Any]] | None = None, current: str | None = "main") -> Path:
    (path.parent / "pki").mkdir(exist_ok=True)
    (path.parent / "pki" / "ca.crt").write_text("CA")
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", **({"current-context": current} if current else {}),
        "clusters": clusters or [{"name": "local", "cluster": {"server": SERVER, "certificate-authority": "pki/ca.crt"}}],
        "users": users,
        "contexts": [{"name": "main", "context": {"cluster": "local", "user": "admin"}},
                     {"name": "other", "context": {"cluster": "local", "user": "reader"}}],
    }))
    return path


def _plugin(tmp_path: Path, expires_in: float | None, api_version: str = "client.authentication.k8s.io/v1", **spec: object) -> dict[str, Any]:
    """An exec plugin that counts its runs in a file and prints a token valid ``expires_in`` seconds."""
    script = tmp_path / "plugin.py"
    expiry = "" if expires_in is None else (
        "status['expirationTimestamp'] = (datetime.datetime.now(datetime.UTC) + "
        f"datetime.timedelta(seconds={expires_in})).strftime('%Y-%m-%dT%H:%M:%SZ')\n")
    script.write_text(
        "import datetime, json, os, sys\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "with open(os.environ['RUNS'], 'a') as runs: runs.write(json.dumps(info) + '\\n')\n"
        f"status = {{'token': 'from-plugin'}}\n{expiry}"
        "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential', 'status': status}))\n")
    return {"exec": {"apiVersion": api_version, "command": sys.executable, "args": [str(script)],
                     "env": [{"name": "RUNS", "value": str(tmp_path / "runs")}], **spec}}


def _runs(tmp_path: Path) -> list[dict[str, Any]]:
    runs = tmp_path / "runs"
    return [json.loads(line) for line in runs.read_text().splitlines()] if runs.exists() else []


def test_current_context_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    config = _write(tmp_path / "config", [{"name": "admin", "user": {"token": "secret"}}])
    credentials = load_credentials(str(config))
    assert credentials.server == SERVER
    assert credentials.ca_file == str(tmp_path / "pki" / "ca.crt")
    assert ("Authorization", "Bearer secret") in credentials.headers("application/json")


def test_named_context_inline_certificate_and_token_file(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"  # handed on as a file, for TLS to load
    config = _write(tmp_path / "config", [
        {"name": "admin", "user": {"token": "secret"}},
        {"name": "reader", "user": {"tokenFile": "token", "client-certificate-data": base64.b64encode(pem.encode()).decode()}}])
    credentials = load_credentials(str(config), context="other")
    assert credentials.cert_file is not None and Path(credentials.cert_file).read_text() == pem
    assert credentials.authorization() == "Bearer from-file"


def test_several_files_merge_as_kubectl_merges_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first file to name a user or set the current context wins; files that do not exist are skipped."""
    first = _write(tmp_path / "first", [{"name": "admin", "user": {"token": "first"}}], current="other")
    second = _write(tmp_path / "second", [{"name": "admin", "user": {"token": "second"}},
                                          {"name": "reader", "user": {"token": "reader"}}], current="main")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "absent"), str(first), str(second)]))
    assert load_credentials().authorization() == "Bearer reader"  # first's current context, second's user
    assert load_credentials(context="main").authorization() == "Bearer first"


def test_server_path_proxy_and_tls_server_name_are_kept(tmp_path: Path) -> None:
    clusters = [{"name": "local", "cluster": {"server": "https://rancher.example/k8s/clusters/c-1/", "insecure-skip-tls-verify": True,
                                              "tls-server-name": "api.internal", "proxy-url": "http://127.0.0.1:3128"}}]
    config = _write(tmp_path / "config", [{"name": "admin", "user": {"token": "t"}}], clusters)
    credentials = load_credentials(str(config))
    assert prepare(credentials, "/api/v1/nodes", {"limit": "1"}, None, "application/json").url == \
        "https://rancher.example/k8s/clusters/c-1/api/v1/nodes?limit=1"
    assert credentials.proxy == "http://127.0.0.1:3128" and credentials.tls_server_name == "api.internal"
    assert credentials.insecure


def test_environment_proxy_unless_no_proxy_names_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _write(tmp_path / "config", [{"name": "admin", "user": {"token": "t"}}])
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.delenv("https_proxy", raising=False)
    monkeypatch.setenv("NO_PROXY", "example.org")
    assert load_credentials(str(config)).proxy == "http://proxy.example:3128"
    monkeypatch.setenv("NO_PROXY", "example.org,127.0.0.1")
    assert load_credentials(str(config)).proxy is None


def test_the_tls_server_name_is_what_the_certificate_is_checked_against() -> None:
    import ssl

    context = Credentials(SERVER, tls_server_name="api.internal", insecure=False).ssl_context()
    tls = context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="127.0.0.1")
    assert tls.server_hostname == "api.internal"


def test_impersonation_from_the_flags_or_the_kubeconfig_repeats_the_group_header(tmp_path: Path) -> None:
    config = _write(tmp_path / "config", [{"name": "admin", "user": {"token": "t", "as": "jane", "as-groups": ["ops"]}}])
    assert [h for h in load_credentials(str(config)).identity() if h[0].startswith("Impersonate")] == [
        ("Impersonate-User", "jane"), ("Impersonate-Group", "ops")]
    flags = Impersonation("joe", ("dev", "qa"))
    assert [h for h in load_credentials(str(config), impersonation=flags).identity() if h[0].startswith("Impersonate")] == [
        ("Impersonate-User", "joe"), ("Impersonate-Group", "dev"), ("Impersonate-Group", "qa")]


def test_an_exec_plugin_runs_once_per_credential_lifetime(tmp_path: Path) -> None:
    config = _write(tmp_path / "config", [{"name": "admin", "user": _plugin(tmp_path, 3600, interactiveMode="Never")}])
    credentials = load_credentials(str(config))
    assert [credentials.authorization() for _ in range(5)] == ["Bearer from-plugin"] * 5
    assert len(_runs(tmp_path)) == 1
    assert _runs(tmp_path)[0]["spec"] == {"interactive": False}
    expires = credentials.expires()
    assert expires is not None and expires > datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=59)


def test_an_expired_exec_credential_is_fetched_again(tmp_path: Path) -> None:
    """No five-minute margin (the official loader's): a two-minute token is used for its two minutes."""
    config = _write(tmp_path / "config", [{"name": "admin", "user": _plugin(tmp_path, 120, interactiveMode="Never")}])
    credentials = load_credentials(str(config))
    credentials.authorization()
    assert len(_runs(tmp_path)) == 1
    short = tmp_path / "config-expired"
    _write(short, [{"name": "admin", "user": _plugin(tmp_path, -1, interactiveMode="Never")}])
    expired = load_credentials(str(short))
    expired.authorization()
    expired.authorization()
    assert len(_runs(tmp_path)) == 4  # the one above, then the expired one at load and at each use


def test_an_exec_plugin_without_expiry_runs_once_and_learns_its_cluster_when_it_asks(tmp_path: Path) -> None:
    user = _plugin(tmp_path, None, "client.authentication.k8s.io/v1beta1", provideClusterInfo=True)
    credentials = load_credentials(str(_write(tmp_path / "config", [{"name": "admin", "user": user}])))
    credentials.authorization()
    credentials.authorization()
    [run] = _runs(tmp_path)
    assert run["spec"]["cluster"] == {"server": SERVER, "certificate-authority-data": base64.b64encode(b"CA").decode()}
    assert credentials.expires() is None


@pytest.mark.parametrize(
    ("exec_spec", "message"),
    [({"interactiveMode": "Always"}, "needs a terminal"),
     ({}, "interactiveMode '' is not valid for client.authentication.k8s.io/v1"),
     ({"apiVersion": "client.authentication.k8s.io/v1alpha1", "interactiveMode": "Never"}, "is not one kubectl runs"),
     ({"command": "/nonexistent/aws-iam-authenticator", "args": [], "interactiveMode": "Never",
       "installHint": "install aws-iam-authenticator from your package manager"}, "install aws-iam-authenticator")],
)
def test_what_an_exec_plugin_cannot_do_is_named_with_the_fix(tmp_path: Path, exec_spec: dict[str, Any], message: str) -> None:
    user = _plugin(tmp_path, 60)
    user["exec"].update(exec_spec)
    with pytest.raises(ConfigError, match=message):
        load_credentials(str(_write(tmp_path / "config", [{"name": "admin", "user": user}])))


def test_kubeconfig_from_the_environment_before_the_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _write(tmp_path / "config", [{"name": "admin", "user": {"token": "secret"}}])
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(config), str(tmp_path / "absent")]))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert load_credentials().server == SERVER


def test_service_account_inside_a_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr("node_maintenance.client.config.SERVICE_ACCOUNT_DIR", tmp_path)
    (tmp_path / "token").write_text("rotated-1\n")
    credentials = load_credentials()
    assert credentials.server == "https://[fd00::1]:443"
    assert credentials.authorization() == "Bearer rotated-1"
    (tmp_path / "token").write_text("rotated-2\n")
    assert credentials.authorization() == "Bearer rotated-1"  # not read at every request
    later = time.monotonic() + TOKEN_RELOAD_SECONDS
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert credentials.authorization() == "Bearer rotated-2"  # the kubelet's rotation is read within a minute


@pytest.mark.parametrize(
    ("clusters", "context", "message"),
    [(None, "missing", "Expected object with name missing in .*contexts list; fix it, or pick another --context"),
     ([{"name": "local", "cluster": {"insecure-skip-tls-verify": True}}], None, "the context's cluster has no server; add its server URL")],
)
def test_what_cannot_be_used_is_named_with_the_fix(tmp_path: Path, clusters: list[dict[str, Any]] | None, context: str | None, message: str) -> None:
    config = _write(tmp_path / "config", [{"name": "admin", "user": {"token": "t"}}], clusters)
    with pytest.raises(ConfigError, match=message):
        load_credentials(str(config), context=context)


def test_no_kubeconfig_outside_a_pod_says_what_to_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match="set KUBECONFIG"):
        load_credentials()


def test_a_proxy_url_is_named_without_its_credentials(tmp_path: Path) -> None:
    config = _write(tmp_path / "config", [{"name": "admin", "user": {"token": "t"}}],
                    [{"name": "local", "cluster": {"server": SERVER, "proxy-url": "socks5://admin:s3cret@proxy.example:1080"}}])
    with pytest.raises(ConfigError) as refused:
        load_credentials(str(config))
    assert "s3cret" not in str(refused.value) and "'socks5://***@proxy.example:1080'" in str(refused.value)
