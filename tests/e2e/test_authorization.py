"""Through the operator a person can do what they could do themselves, and no more, on the local control plane with
real RBAC: users impersonated with ``--as``, holding only the ClusterRoles the bundle ships (or OLM's aggregated
``edit``-like right to create NodeMaintenances alone), create maintenances through the operator's admission webhook.
One who may not drain the node is refused; one who may drain it but not escalate cannot have the operator delete a pod
past its budget; one bound to the escalator role can, and the pod is deleted. A policy's author may have its hook Jobs
run only where they may create Jobs themselves, and never in the operator's namespace."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from devcluster.cluster import Cluster
from devcluster.operator import ROOT, OperatorProcess
from node_maintenance.api import GROUP, PLURAL, POLICY
from node_maintenance.api.roles import ESCALATOR_ROLE, REQUESTER_ROLE
from node_maintenance.drain.plans import Action
from node_maintenance.policy.hooks import HOOK_LABEL
from node_maintenance_packaging.clusterserviceversion import NAMESPACE as OPERATOR_NAMESPACE

from .helpers import NMP, RESTRICTED_CONTAINER, RESTRICTED_POD, apply, create_nm, delete_nm, eventually, get, nm, pdb, pod

pytestmark = pytest.mark.e2e

MANIFESTS = ROOT / "bundle" / "manifests"
LADDER = [{"afterSeconds": 1, "action": Action.FORCE_DELETE_PODS}]


def _binding(user: str, role: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": f"{user}-{role}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}


@pytest.fixture(scope="module")
def users(cluster: Cluster) -> Iterator[dict[str, str]]:
    """Four users of their own: one who may only create NodeMaintenances, one bound to the requester role, one to the
    requester and the escalator roles, as the bundle ships them, and one who may only write NodeMaintenancePolicies."""
    run = uuid.uuid4().hex[:5]
    names = {"creator": f"creator-{run}", "requester": f"requester-{run}", "escalator": f"escalator-{run}", "author": f"author-{run}"}
    roles = [yaml.safe_load((MANIFESTS / f"{role}_rbac.authorization.k8s.io_v1_clusterrole.yaml").read_text()) for role in (REQUESTER_ROLE, ESCALATOR_ROLE)]
    creating = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"creates-nm-{run}"},
                "rules": [{"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "create", "delete"]}]}
    writing = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"writes-nmp-{run}"},
               "rules": [{"apiGroups": [GROUP], "resources": [POLICY.plural], "verbs": ["get", "list", "create", "delete"]}]}
    bindings = [_binding(names["creator"], f"creates-nm-{run}"), _binding(names["requester"], REQUESTER_ROLE),
                _binding(names["escalator"], REQUESTER_ROLE), _binding(names["escalator"], ESCALATOR_ROLE),
                _binding(names["author"], f"writes-nmp-{run}")]
    apply(cluster, *roles, creating, writing, *bindings)
    yield names
    for obj in [creating, writing, *bindings]:
        cluster.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found", check=False)


def _create_as(cluster: Cluster, user: str, name: str, node: str, **drain: Any) -> tuple[bool, str]:
    """Create a NodeMaintenance as ``user``; whether it was stored, and what kubectl said."""
    obj = {"apiVersion": f"{GROUP}/v1beta1", "kind": "NodeMaintenance", "metadata": {"name": name},
           "spec": {"nodeName": node, "reason": "e2e", **({"drain": drain} if drain else {})}}
    result = cluster.kubectl("create", f"--as={user}", "-f", "-", input=json.dumps(obj), check=False)
    return result.returncode == 0, result.stderr


def _blocked(cluster: Cluster, namespace: str, target: str) -> None:
    """A pod on ``target`` whose budget lets none of its pods go: only an escalation removes it."""
    apply(cluster, pod("blocked", namespace, target, labels={"app": "blocked"}), pdb("blocked", namespace, {"app": "blocked"}, minAvailable=1))
    eventually(lambda: (get(cluster, "pdb", "blocked", "-n", namespace) or {}).get("status", {}).get("currentHealthy") == 1,
               "the budget counts the pod healthy")


def test_who_may_not_drain_the_node_cannot_have_the_operator_drain_it(cluster: Cluster, operator: OperatorProcess, admission_webhook: str,
                                                                       users: dict[str, str], nodes: Callable[..., list[str]]) -> None:
    (target,) = nodes(1)
    stored, said = _create_as(cluster, users["creator"], f"nm-{target}", target)
    assert not stored and f"user {users['creator']!r} may not patch nodes/{target}" in said and REQUESTER_ROLE in said, said
    assert nm(cluster, f"nm-{target}") is None
    assert not (get(cluster, "node", target) or {}).get("spec", {}).get("unschedulable"), "the node was never cordoned"


def test_a_requester_cannot_escalate_and_an_escalator_can(cluster: Cluster, operator: OperatorProcess, admission_webhook: str, users: dict[str, str],
                                                         nodes: Callable[..., list[str]], namespace: str) -> None:
    (target,) = nodes(1)
    _blocked(cluster, namespace, target)
    name = f"nm-{target}"
    stored, said = _create_as(cluster, users["requester"], name, target, escalation=LADDER)
    assert not stored and f"spec.drain.escalation: user {users['requester']!r} may not escalate" in said and ESCALATOR_ROLE in said, said
    stored, said = _create_as(cluster, users["requester"], name, target, escalation=[])
    assert stored, said
    # Changing the spec asks again: the requester cannot add the ladder afterwards.
    patched = cluster.kubectl("patch", "nm", name, f"--as={users['requester']}", "--type=merge", "-p",
                              json.dumps({"spec": {"drain": {"escalation": LADDER}}}), check=False)
    assert patched.returncode != 0 and "may not escalate" in patched.stderr, patched.stderr
    assert (get(cluster, "pod", "blocked", "-n", namespace) or {}).get("metadata", {}).get("deletionTimestamp") is None
    delete_nm(cluster, name)
    eventually(lambda: nm(cluster, name) is None, "the requester's maintenance gone")
    stored, said = _create_as(cluster, users["escalator"], name, target, escalation=LADDER)
    assert stored, said
    eventually(lambda: (get(cluster, "pod", "blocked", "-n", namespace) or {"metadata": {"deletionTimestamp": "gone"}})["metadata"].get("deletionTimestamp"),
               "the escalator's ladder deletes the blocked pod")
    delete_nm(cluster, name)


def _hook_policy(name: str, selector: dict[str, str], namespace: str) -> dict[str, Any]:
    """A policy whose preDrain Job runs in ``namespace`` (KWOK completes its pod at once)."""
    job = {"spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "securityContext": RESTRICTED_POD, "containers": [
        {"name": "hook", "image": "registry.invalid/hook:1", "securityContext": RESTRICTED_CONTAINER}]}}}}
    return {"apiVersion": f"{GROUP}/{POLICY.versions[-1]}", "kind": POLICY.kind, "metadata": {"name": name},
            "spec": {"nodeSelector": {"matchLabels": selector}, "preDrain": {"namespace": namespace, "jobTemplate": job}}}


def test_a_policy_author_has_hook_jobs_run_only_where_they_may_create_jobs(cluster: Cluster, operator: OperatorProcess, policy_admission_webhook: str,
                                                                          policy_crd: str, users: dict[str, str], nodes: Callable[..., list[str]],
                                                                          namespace: str) -> None:
    author, selector = users["author"], {"hook-author": uuid.uuid4().hex[:6]}
    (target,) = nodes(1, labels=selector)
    name = f"hooks-{selector['hook-author']}"

    def create(hook_namespace: str) -> tuple[bool, str]:
        result = cluster.kubectl("create", f"--as={author}", "-f", "-", input=json.dumps(_hook_policy(name, selector, hook_namespace)), check=False)
        return result.returncode == 0, result.stderr

    stored, said = create(namespace)
    assert not stored and f"spec.preDrain.namespace: user {author!r} may not create jobs.batch in namespace {namespace}" in said, said
    stored, said = create(OPERATOR_NAMESPACE)
    assert not stored and f"spec.preDrain.namespace names the operator's namespace {OPERATOR_NAMESPACE}" in said, said
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "creates-jobs", "namespace": namespace},
            "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": f"{author}-creates-jobs", "namespace": namespace},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "creates-jobs"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": author}]}
    apply(cluster, role, binding)
    try:
        eventually(lambda: create(namespace)[0], "the author's policy admitted once they may create Jobs")
        create_nm(cluster, f"nm-{target}", target)
        jobs = eventually(lambda: (get(cluster, "jobs", "-n", namespace, "-l", HOOK_LABEL) or {}).get("items"), "the preDrain Job in the author's namespace")
        assert [job["metadata"]["labels"][HOOK_LABEL] for job in jobs] == ["pre-drain"], jobs
        assert not (get(cluster, "jobs", "-n", OPERATOR_NAMESPACE, "-l", HOOK_LABEL) or {}).get("items"), "a hook Job in the operator's namespace"
        delete_nm(cluster, f"nm-{target}")
    finally:
        cluster.kubectl("delete", NMP, name, "--ignore-not-found", "--wait=false", check=False)
