"""The plugin's API access: kubeconfig like kubectl, plain dicts out, and every failure as a CliError
that names the object and the fix (callers never see HTTP statuses)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client import exceptions as kerr

from node_maintenance import api

from .errors import CliError, Exit

VERSION = "v1beta1"
NM = f"{api.PLURAL}.{api.GROUP}"


def _message(error: kerr.ApiException) -> str:
    """The API server's own explanation, which names the object and usually the field."""
    try:
        return json.loads(error.body or "")["message"]
    except (ValueError, KeyError, TypeError):
        return f"{error.status} {error.reason}"


@contextlib.contextmanager
def _translated(what: str) -> Iterator[None]:
    """Turn the client's errors about ``what`` into CliErrors; callers catch what they can explain better first."""
    try:
        yield
    except kerr.NotFoundException as error:
        raise CliError(Exit.NOT_FOUND, f"{what}: {_message(error)}") from None
    except kerr.UnauthorizedException:
        raise CliError(Exit.CLUSTER, f"{what}: the cluster refused the credentials; log in again or pick another --context") from None
    except kerr.ForbiddenException as error:
        raise CliError(Exit.CLUSTER, f"{what}: {_message(error)}") from None
    except kerr.UnprocessableEntityException as error:
        raise CliError(Exit.USAGE, f"{what}: {_message(error)}") from None
    except kerr.ApiException as error:
        raise CliError(Exit.CLUSTER, f"{what}: {_message(error)}") from None
    except urllib3.exceptions.HTTPError as error:
        raise CliError(Exit.CLUSTER, f"{what}: cannot reach the API server ({error}); check the server in your kubeconfig "
                                     "or pick another --kubeconfig / --context") from None


class Cluster:
    """Reads and writes NodeMaintenances, nodes, pods and budgets."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        try:
            if kubeconfig or context or not _in_cluster():
                self._client = config.new_client_from_config(config_file=kubeconfig, context=context)
            else:
                configuration = client.Configuration()
                config.load_incluster_config(client_configuration=configuration)
                self._client = client.ApiClient(configuration)
        except (config.ConfigException, OSError) as error:
            source = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise CliError(Exit.CLUSTER, f"no usable kubeconfig in {source} ({error}); set KUBECONFIG or pass "
                                         "--kubeconfig (and --context) naming a kubeconfig of your cluster") from None
        self._client.configuration.retries = 1
        self._core = client.CoreV1Api(self._client)
        self._policy = client.PolicyV1Api(self._client)
        self._custom = client.CustomObjectsApi(self._client)

    def _plain(self, obj: Any) -> Any:
        return self._client.sanitize_for_serialization(obj)

    # ------------------------------------------------------------------ NodeMaintenances
    def maintenances(self) -> list[dict[str, Any]]:
        with _translated(f"list {NM}"):
            try:
                return self._custom.list_cluster_custom_object(api.GROUP, VERSION, api.PLURAL)["items"]
            except kerr.NotFoundException:
                raise CliError(Exit.NOT_FOUND, f"this cluster does not serve {NM}/{VERSION}; install the Node Maintenance "
                                               "Operator (docs/install.md)") from None

    def maintenance(self, name: str) -> dict[str, Any] | None:
        with _translated(f"get NodeMaintenance {name}"):
            try:
                return self._custom.get_cluster_custom_object(api.GROUP, VERSION, api.PLURAL, name)
            except kerr.NotFoundException:
                return None

    def create_maintenance(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        with _translated(f"create NodeMaintenance {name}"):
            try:
                return self._custom.create_cluster_custom_object(api.GROUP, VERSION, api.PLURAL, body)
            except kerr.ConflictException:
                raise CliError(Exit.CONFLICT, f"NodeMaintenance {name} already exists; stop it first (kubectl nm stop "
                                              f"{body['spec']['nodeName']}) or pass another --name") from None

    def delete_maintenance(self, name: str) -> bool:
        """Ask for deletion; False when it is already gone."""
        with _translated(f"delete NodeMaintenance {name}"):
            try:
                self._custom.delete_cluster_custom_object(api.GROUP, VERSION, api.PLURAL, name)
                return True
            except kerr.NotFoundException:
                return False

    # ------------------------------------------------------------------ what a drain touches
    def node(self, name: str) -> dict[str, Any]:
        with _translated(f"get node {name}"):
            try:
                return self._plain(self._core.read_node(name))
            except kerr.NotFoundException:
                raise CliError(Exit.NOT_FOUND, f"node {name} not found; name an existing node (kubectl get nodes)") from None

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        with _translated(f"list the pods of node {node}"):
            return self._plain(self._core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}"))["items"]

    def pods_in(self, namespace: str) -> list[dict[str, Any]]:
        with _translated(f"list the pods of namespace {namespace}"):
            return self._plain(self._core.list_namespaced_pod(namespace))["items"]

    def budgets_in(self, namespace: str) -> list[dict[str, Any]]:
        with _translated(f"list the PodDisruptionBudgets of namespace {namespace}"):
            return self._plain(self._policy.list_namespaced_pod_disruption_budget(namespace))["items"]


def _in_cluster() -> bool:
    """Inside a pod without a kubeconfig, use its ServiceAccount, as kubectl does."""
    return "KUBERNETES_SERVICE_HOST" in os.environ and not os.environ.get("KUBECONFIG") and not os.path.exists(
        os.path.expanduser("~/.kube/config")
    )
