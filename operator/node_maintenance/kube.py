"""Dict-in, dict-out access to the Kubernetes API, through the official client's auth and TLS.

The runtime works with plain JSON objects (as the API sends them and as the pure functions
expect), and says which patch type it sends instead of relying on a generated default.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def load_api_client() -> client.ApiClient:
    """KUBECONFIG (or ~/.kube/config) when present, else the in-cluster ServiceAccount."""
    try:
        return config.new_client_from_config()
    except config.ConfigException:
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration)


class Kube:
    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30,
    ) -> dict[str, Any]:
        _, url, headers, payload, _ = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(method, url, header_params=headers, body=payload, _request_timeout=timeout)
        data = response.read()
        if not 200 <= response.status < 300:
            raise ApiException(status=response.status, reason=response.reason, body=data.decode(errors="replace"))
        return json.loads(data) if data else {}

    def get(self, path: str, **query: str) -> dict[str, Any] | None:
        """GET, with None for a missing object."""
        try:
            return self.request("GET", path, query=query or None)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def patch(self, path: str, body: dict[str, Any], content_type: str = MERGE_PATCH) -> dict[str, Any]:
        return self.request("PATCH", path, body=body, content_type=content_type)


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{quote(name)}"


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"


def nm_path(name: str = "", *, version: str = "v1beta1", subresource: str = "") -> str:
    from .api import GROUP, PLURAL

    path = f"/apis/{GROUP}/{version}/{PLURAL}"
    if name:
        path += f"/{quote(name)}"
    if subresource:
        path += f"/{subresource}"
    return path
