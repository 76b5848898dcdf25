"""Credentials are read from a kubeconfig as kubectl reads them, else from the pod's ServiceAccount."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
import yaml

from node_maintenance.client import config as kube


def _write(path: Path, users: list[dict], clusters: list[dict] | None = None, current: str = "main") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": clusters or [{"name": "local", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority": "pki/ca.crt"}}],
        "users": users,
        "contexts": [{"name": "main", "context": {"cluster": "local", "user": "admin"}},
                     {"name": "other", "context": {"cluster": "local", "user": "reader"}}],
    }))
    return path


def test_current_context_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    config = _write(tmp_path / "config", [{"name": "admin", "user": {"token": "secret"}}])
    credentials = kube.load_credentials(str(config))
    assert credentials.server == "https://127.0.0.1:6443"
    assert credentials.ca_file == str(tmp_path / "pki" / "ca.crt")
    assert credentials.headers("application/json")["Authorization"] == "Bearer secret"


def test_named_context_inline_certificates_and_token_file(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("rotated-1\n")
    pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    config = _write(tmp_path / "config", [
        {"name": "admin", "user": {"token": "secret"}},
        {"name": "reader", "user": {"tokenFile": "token", "client-certificate-data": base64.b64encode(pem.encode()).decode()}}])
    credentials = kube.load_credentials(str(config), context="other")
    assert credentials.cert_data == pem and credentials.cert_file is None
    assert credentials.bearer() == "rotated-1"
    (tmp_path / "token").write_text("rotated-2\n")
    assert credentials.bearer() == "rotated-2"  # read at each use


def test_kubeconfig_from_the_environment_before_the_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _write(tmp_path / "config", [{"name": "admin", "user": {"token": "secret"}}])
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(config), str(tmp_path / "absent")]))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert kube.load_credentials().server == "https://127.0.0.1:6443"


def test_service_account_inside_a_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    credentials = kube.load_credentials()
    assert credentials.server == "https://[fd00::1]:443"
    assert credentials.token_file == str(kube.SERVICE_ACCOUNT_DIR / "token")
    assert credentials.ca_file == str(kube.SERVICE_ACCOUNT_DIR / "ca.crt")


@pytest.mark.parametrize(
    ("users", "context", "message"),
    [([{"name": "admin", "user": {"exec": {"command": "login"}}}], None, "user 'admin' logs in through an exec plugin"),
     ([{"name": "admin", "user": {"token": "t"}}], "missing", "has no context named 'missing'"),
     ([], None, "has no user named 'admin'")],
)
def test_what_cannot_be_used_is_named_with_the_fix(tmp_path: Path, users: list[dict], context: str | None, message: str) -> None:
    config = _write(tmp_path / "config", users)
    with pytest.raises(kube.ConfigError, match=message):
        kube.load_credentials(str(config), context=context)


def test_no_kubeconfig_outside_a_pod_says_what_to_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(kube.ConfigError, match="set KUBECONFIG"):
        kube.load_credentials()
