"""The plugin's API access: kubeconfig like kubectl, plain dicts out, and every failure as a CliError
that names the object and the fix (callers never see HTTP statuses).

It stands on the operator's own API layer (``node_maintenance.client``), whose typed errors it translates.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any, cast
from urllib.parse import quote

from node_maintenance import api
from node_maintenance.api.paths import daemonset_path, nm_path, node_path, policy_path
from node_maintenance.client.config import load_credentials
from node_maintenance.client.credentials import Impersonation
from node_maintenance.client.errors import ApiError, ConfigError, Conflict, Invalid, NotFound, Unauthorized, Unreachable
from node_maintenance.client.http import Kube

from .errors import CliError, Exit

VERSION = "v1beta1"
NM = f"{api.PLURAL}.{api.GROUP}"


def _items(listing: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of a list the API server answered."""
    return cast(list[dict[str, Any]], listing["items"])


@contextlib.contextmanager
def _translated(what: str) -> Iterator[None]:
    """Turn the API layer's errors about ``what`` into CliErrors; callers catch what they can explain better first."""
    try:
        yield
    except NotFound as error:
        raise CliError(Exit.NOT_FOUND, f"{what}: {error.message or error}") from None
    except Unauthorized:
        raise CliError(Exit.CLUSTER, f"{what}: the cluster refused the credentials; log in again or pick another --context") from None
    except Invalid as error:
        raise CliError(Exit.USAGE, f"{what}: {error.message or error}") from None
    except ApiError as error:  # Forbidden and the rest: the server's message says what was refused
        raise CliError(Exit.CLUSTER, f"{what}: {error.message or error}") from None
    except ConfigError as error:  # an exec plugin that failed when its credential expired
        raise CliError(Exit.CLUSTER, f"{what}: {error}") from None
    except Unreachable as error:  # refused, unresolvable, TLS: the server is not where the kubeconfig says
        raise CliError(Exit.CLUSTER, f"{what}: cannot reach the API server ({error}); check the server in your kubeconfig "
                                     "or pick another --kubeconfig / --context") from None


class Cluster:
    """Reads and writes NodeMaintenances, nodes, pods and budgets; reads DaemonSets."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 impersonation: Impersonation | None = None) -> None:
        try:
            self._kube = Kube(load_credentials(kubeconfig, context, impersonation))
        except ConfigError as error:  # its message names the file and the fix
            raise CliError(Exit.CLUSTER, str(error)) from None
        except OSError as error:  # a certificate or key the kubeconfig names cannot be loaded
            raise CliError(Exit.CLUSTER, f"the kubeconfig's certificates cannot be loaded ({error}); fix them or pass "
                                         "--kubeconfig (and --context) naming a kubeconfig of your cluster") from None

    # ------------------------------------------------------------------ NodeMaintenances
    def maintenances(self) -> list[dict[str, Any]]:
        with _translated(f"list {NM}"):
            try:
                return _items(self._kube.request("GET", nm_path(version=VERSION)))
            except NotFound:
                raise CliError(Exit.NOT_FOUND, f"this cluster does not serve {NM}/{VERSION}; install the Node Maintenance "
                                               "Operator (docs/install.md)") from None

    def maintenance(self, name: str) -> dict[str, Any] | None:
        with _translated(f"get NodeMaintenance {name}"):
            return self._kube.get(nm_path(name, version=VERSION))

    def create_maintenance(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        with _translated(f"create NodeMaintenance {name}"):
            try:
                return self._kube.request("POST", nm_path(version=VERSION), body=body)
            except Conflict:
                raise CliError(Exit.CONFLICT, f"NodeMaintenance {name} already exists; stop it first (kubectl nm stop "
                                              f"{body['spec']['nodeName']}) or pass another --name") from None

    def delete_maintenance(self, name: str) -> bool:
        """Ask for deletion; False when it is already gone."""
        with _translated(f"delete NodeMaintenance {name}"):
            try:
                self._kube.request("DELETE", nm_path(name, version=VERSION))
                return True
            except NotFound:
                return False

    def policies(self) -> list[dict[str, Any]]:
        """The NodeMaintenancePolicies (none where the cluster does not serve them): a drain follows the defaults, rules
        and escalation cap of the one selecting its node."""
        with _translated(f"list {api.POLICY.plural}.{api.GROUP}"):
            try:
                return _items(self._kube.request("GET", policy_path()))
            except NotFound:
                return []

    # ------------------------------------------------------------------ what a drain touches
    def node(self, name: str) -> dict[str, Any]:
        with _translated(f"get node {name}"):
            node = self._kube.get(node_path(name))
        if node is None:
            raise CliError(Exit.NOT_FOUND, f"node {name} not found; name an existing node (kubectl get nodes)")
        return node

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        with _translated(f"list the pods of node {node}"):
            return _items(self._kube.request("GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={node}"}))

    def pods_in(self, namespace: str) -> list[dict[str, Any]]:
        with _translated(f"list the pods of namespace {namespace}"):
            return _items(self._kube.request("GET", f"/api/v1/namespaces/{quote(namespace)}/pods"))

    def budgets_in(self, namespace: str) -> list[dict[str, Any]]:
        with _translated(f"list the PodDisruptionBudgets of namespace {namespace}"):
            return _items(self._kube.request("GET", f"/apis/policy/v1/namespaces/{quote(namespace)}/poddisruptionbudgets"))

    def daemonsets_exist(self, keys: Iterable[str]) -> dict[str, bool]:
        """Whether each DaemonSet ("namespace/name") exists; one the server refuses to show (RBAC) is left out:
        unknown, its pods stay, as the operator keeps them."""
        found = {}
        for key in sorted(keys):
            namespace, name = key.split("/", 1)
            with _translated(f"get DaemonSet {key}"), contextlib.suppress(ApiError):
                found[key] = self._kube.get(daemonset_path(namespace, name)) is not None
        return found
