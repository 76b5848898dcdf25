"""The API paths of every object the operator reads or writes, written once."""

from __future__ import annotations

from urllib.parse import quote

from node_maintenance.api import CRD_NAME, GROUP, HUB, PLURAL, POLICY

POLICY_VERSION = "v1beta1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CRDS_KIND = "customresourcedefinitions"  # what a 404's details name for a missing CRD
NODE_MAINTENANCE_CRD = f"{CRDS}/{CRD_NAME}"
POLICY_CRD = f"{CRDS}/{POLICY.crd_name}"
BUDGETS = "/apis/policy/v1/poddisruptionbudgets"
PODS = "/api/v1/pods"
NAMESPACES = "/api/v1/namespaces"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
VALIDATING_WEBHOOK_CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


def node_path(name: str = "") -> str:
    return f"/api/v1/nodes/{quote(name)}" if name else "/api/v1/nodes"


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"


def secret_path(namespace: str, name: str = "") -> str:
    """A Secret (the webhook serving certificate the operator keeps itself), or the namespace's collection."""
    path = f"/api/v1/namespaces/{quote(namespace)}/secrets"
    return f"{path}/{quote(name)}" if name else path


def validating_webhook_configuration_path(name: str) -> str:
    return f"{VALIDATING_WEBHOOK_CONFIGURATIONS}/{quote(name)}"


def daemonset_path(namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{quote(namespace)}/daemonsets/{quote(name)}"


def nm_path(name: str = "", *, version: str = HUB, subresource: str = "") -> str:
    return _custom(f"/apis/{GROUP}/{version}/{PLURAL}", name, subresource)


def policy_path(name: str = "", subresource: str = "") -> str:
    return _custom(f"/apis/{GROUP}/{POLICY_VERSION}/{POLICY.plural}", name, subresource)


def jobs_path(namespace: str = "") -> str:
    """The Jobs of ``namespace``; of every namespace when empty."""
    return f"/apis/batch/v1/namespaces/{quote(namespace)}/jobs" if namespace else "/apis/batch/v1/jobs"


def events_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace)}/events"


def lease_path(namespace: str, name: str = "") -> str:
    """A coordination.k8s.io Lease (leader election and the remediation Leases), or the namespace's collection."""
    path = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace)}/leases"
    return f"{path}/{quote(name)}" if name else path


def _custom(collection: str, name: str, subresource: str) -> str:
    return collection + (f"/{quote(name)}" if name else "") + (f"/{subresource}" if subresource else "")
