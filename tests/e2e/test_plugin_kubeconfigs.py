"""`kubectl nm` with the kubeconfigs of managed clusters: a user that logs in through an exec plugin, a
server behind an HTTP CONNECT proxy or under a path prefix, a TLS server name, and impersonation."""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.cluster import Cluster
from devcluster.httpproxies import ConnectProxy, PrefixProxy
from devcluster.operator import OperatorProcess

from .helpers import PLUGIN_ACCOUNT, PLUGIN_USER, apply, eventually, get, kubectl_nm, nm, pod

pytestmark = pytest.mark.e2e
RANCHER_PREFIX = "/k8s/clusters/local"


@pytest.fixture(scope="module")
def admin_token(cluster: Cluster) -> str:
    """The token of an admin's ServiceAccount, as a managed cluster's login would hand it out."""
    namespace, name = PLUGIN_ACCOUNT
    cluster.service_account_kubeconfig(namespace, name)  # creates the account
    cluster.create_unless_present({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": f"{namespace}-{name}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})
    return cluster.kubectl("create", "token", name, "-n", namespace, "--duration=1h").stdout.strip()


def write_kubeconfig(path: Path, server: str, user: dict[str, Any], **cluster: object) -> Path:
    """A kubeconfig of one cluster entry (``server`` and ``cluster``'s fields) and one user."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "managed",
        "clusters": [{"name": "managed", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "someone", "user": user}],
        "contexts": [{"name": "managed", "context": {"cluster": "managed", "user": "someone"}}]}))
    return path


@pytest.fixture
def drainable(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> str:
    """A node with a pod on it, for start --wait to drain."""
    (target,) = nodes(1)
    apply(cluster, pod("app", namespace, target))
    eventually(lambda: (get(cluster, "pod", "app", "-n", namespace) or {}).get("status", {}).get("phase") == "Running", "app running")
    return target


def every_verb(cluster: Cluster, target: str, kubeconfig: Path, env: dict[str, str] | None = None) -> int:
    """Run each verb once, a drain start to finish among them; each must succeed. Returns how many ran."""
    invocations = [("status",), ("plan", target), ("start", target, "--reason", "kubeconfig", "--wait"),
                   ("status", target, "-o", "json"), ("stop", target, "--wait")]
    for args in invocations:
        run = kubectl_nm(cluster, *args, kubeconfig=kubeconfig, env=env)
        assert run.code == 0, f"kubectl nm {' '.join(args)}: {run.err}"
    assert nm(cluster, target) is None
    return len(invocations)


def test_every_verb_with_an_exec_plugin_that_runs_once_per_invocation(cluster: Cluster, admin_token: str, drainable: str,
                                                                       tmp_path: Path) -> None:
    (tmp_path / "token").write_text(admin_token)
    expires = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    plugin = tmp_path / "get-token.py"  # prints an ExecCredential, as aws eks get-token does, and counts its runs
    plugin.write_text(
        "import json, os, pathlib\n"
        "with open(os.environ['RUNS'], 'a') as runs: runs.write(os.environ['KUBERNETES_EXEC_INFO'] + '\\n')\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', 'status': {\n"
        "    'token': pathlib.Path(os.environ['TOKEN_FILE']).read_text(), 'expirationTimestamp': os.environ['EXPIRES']}}))\n")
    runs = tmp_path / "runs"
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(plugin)],
                     "interactiveMode": "Never", "env": [{"name": "RUNS", "value": str(runs)}, {"name": "EXPIRES", "value": expires},
                                                         {"name": "TOKEN_FILE", "value": str(tmp_path / "token")}]}}
    kubeconfig = write_kubeconfig(tmp_path / "exec.kubeconfig", cluster.server, user, **{"certificate-authority": str(cluster.ca_file)})
    before = _requests(cluster)

    invocations = every_verb(cluster, drainable, kubeconfig)

    plugin_runs = [json.loads(line) for line in runs.read_text().splitlines()]
    assert len(plugin_runs) == invocations  # once per process: each reused its credential for all its requests
    assert all(run["spec"]["interactive"] is False for run in plugin_runs)
    made = _requests(cluster) - before
    assert len(made) > 2 * invocations, f"{len(made)} requests"  # so a plugin run per request would have shown


def _requests(cluster: Cluster) -> set[str]:
    """The audit IDs of the requests the admin's ServiceAccount made."""
    return {e["auditID"] for e in cluster.audit_events(PLUGIN_USER, every_request=True)}


@pytest.fixture
def connect_proxy() -> Iterator[ConnectProxy]:
    with ConnectProxy() as proxy:
        yield proxy


def test_through_an_http_connect_proxy_named_by_the_kubeconfig_or_the_environment(
        cluster: Cluster, admin_token: str, drainable: str, connect_proxy: ConnectProxy, tmp_path: Path) -> None:
    server = cluster.server.removeprefix("https://")
    ca = {"certificate-authority": str(cluster.ca_file)}
    proxied = write_kubeconfig(tmp_path / "proxied.kubeconfig", cluster.server, {"token": admin_token}, **ca, **{"proxy-url": connect_proxy.url})
    every_verb(cluster, drainable, proxied)
    through_kubeconfig = len(connect_proxy.tunnels)
    assert through_kubeconfig >= 5 and set(connect_proxy.tunnels) == {server}

    direct = write_kubeconfig(tmp_path / "direct.kubeconfig", cluster.server, {"token": admin_token}, **ca)
    assert kubectl_nm(cluster, "status", kubeconfig=direct, env={"HTTPS_PROXY": connect_proxy.url, "NO_PROXY": ""}).code == 0
    assert len(connect_proxy.tunnels) > through_kubeconfig
    through_environment = len(connect_proxy.tunnels)
    assert kubectl_nm(cluster, "status", kubeconfig=direct, env={"HTTPS_PROXY": connect_proxy.url, "NO_PROXY": "127.0.0.1"}).code == 0
    assert len(connect_proxy.tunnels) == through_environment  # NO_PROXY names the server: no tunnel


def test_a_server_served_under_a_path_prefix(cluster: Cluster, admin_token: str, drainable: str, tmp_path: Path) -> None:
    with PrefixProxy(cluster.server, cluster.ca_file, RANCHER_PREFIX) as proxy:
        kubeconfig = write_kubeconfig(tmp_path / "prefixed.kubeconfig", proxy.url, {"token": admin_token})
        every_verb(cluster, drainable, kubeconfig)
        paths = list(proxy.paths)
    assert paths and all(p.startswith(RANCHER_PREFIX + "/") for p in paths), sorted(set(paths) - {p for p in paths if p.startswith(RANCHER_PREFIX)})
    assert any(p.startswith(f"{RANCHER_PREFIX}/apis/nodemaintenance.kubevirt.io/") for p in paths)


def test_the_tls_server_name_is_the_name_checked(cluster: Cluster, admin_token: str, tmp_path: Path) -> None:
    ca = {"certificate-authority": str(cluster.ca_file)}
    named = write_kubeconfig(tmp_path / "named.kubeconfig", cluster.server, {"token": admin_token}, **ca, **{"tls-server-name": "kubernetes"})
    assert kubectl_nm(cluster, "status", kubeconfig=named).code == 0
    wrong = write_kubeconfig(tmp_path / "wrong.kubeconfig", cluster.server, {"token": admin_token}, **ca,
                             **{"tls-server-name": "not-the-api-server.example"})
    refused = kubectl_nm(cluster, "status", kubeconfig=wrong)
    assert refused.code == 1 and "not-the-api-server.example" in refused.err, refused.err


def test_impersonation_acts_as_the_user_and_each_group(cluster: Cluster) -> None:
    forbidden = kubectl_nm(cluster, "status", "--as", "jane")
    assert forbidden.code == 1
    assert 'User "jane" cannot list resource "nodemaintenances"' in forbidden.err, forbidden.err
    # Each group is a header of its own: joined into one, "ops,system:masters" would be a group without rights.
    allowed = kubectl_nm(cluster, "status", "--as", "jane", "--as-group", "ops", "--as-group", "system:masters")
    assert allowed.code == 0, allowed.err
    usage = kubectl_nm(cluster, "status", "--as-group", "ops")
    assert usage.code == 2 and "--as-group needs --as" in usage.err
