"""Least privilege, proved from the API server's audit log: the operator runs under a ServiceAccount bound
to exactly the CSV's rules, every request it made in this test run was allowed, and every verb the CSV
grants was needed by the drain, the give-back, the admission webhook, leader election, the
storage-version migration and a scrape of the secured /metrics that this test drives. The Deployment passes the `restricted` Pod Security
Standard its namespace enforces."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.cluster import Cluster
from devcluster.operator import USER as OPERATOR_USER
from devcluster.operator import OperatorProcess, csv_install_spec
from node_maintenance.api import CRD_NAME, GROUP, KIND, POLICY
from node_maintenance.coordination.remediation import DEFAULT_LEASE_NAMESPACE
from node_maintenance.runtime.leader import LEASE_NAME
from node_maintenance_packaging.clusterserviceversion import NAMESPACE

from .helpers import (
    NAMESPACE_MANIFEST,
    RESTRICTED_CONTAINER,
    RESTRICTED_POD,
    apply,
    create_nm,
    daemonset,
    delete_nm,
    deployment,
    eventually,
    existing,
    get,
    install_policy_crd,
    nm_status,
    pdb,
    pod,
    pods_on,
)

pytestmark = pytest.mark.e2e


def _policy(name: str, labels: dict[str, str], namespace: str) -> dict[str, Any]:
    """A NodeMaintenancePolicy for the nodes with ``labels``, with a Job before the drain and one before the give-back, both
    in ``namespace`` (the Jobs of every namespace are watched, and created there), that waits for the evicted workloads'
    health (their watches)."""
    job = {"spec": {"backoffLimit": 0, "template": {"spec": {
        "restartPolicy": "Never", "securityContext": RESTRICTED_POD,
        "containers": [{"name": "hook", "image": "registry.invalid/hook:1", "securityContext": RESTRICTED_CONTAINER}]}}}}
    return {"apiVersion": f"{GROUP}/{POLICY.versions[-1]}", "kind": POLICY.kind, "metadata": {"name": name},
            "spec": {"nodeSelector": {"matchLabels": labels}, "maxParallel": 1, "waitForHealthy": True,
                     "preDrain": {"namespace": namespace, "jobTemplate": job},
                     "postMaintenance": {"namespace": namespace, "jobTemplate": job}}}


@dataclass(frozen=True)
class Grant:
    """One verb on one resource that the CSV grants (``namespace`` set for a Role's rules)."""

    group: str
    resource: str  # with its subresource, as RBAC names it: pods/eviction
    verb: str
    names: tuple[str, ...] = ()
    namespace: str | None = None

    def allows(self, event: dict[str, Any]) -> bool:
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        return (
            event.get("verb") == self.verb
            and ref.get("apiGroup", "") == self.group
            and resource == self.resource
            and (not self.names or ref.get("name") in self.names)
            and (self.namespace is None or ref.get("namespace") == self.namespace)
        )

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        names = f" {list(self.names)}" if self.names else ""
        return f"{self.verb} {self.group or 'core'}/{self.resource}{names}{where}"


def csv_grants() -> list[Grant]:
    spec = csv_install_spec()
    grants = []
    for scope, namespace in (("clusterPermissions", None), ("permissions", NAMESPACE)):
        for entry in spec.get(scope) or []:
            for rule in entry["rules"]:
                assert "nonResourceURLs" not in rule, "the operator needs no non-resource URLs"
                grants += [Grant(group, resource, verb, tuple(rule.get("resourceNames", ())), namespace)
                           for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]]
    return grants


def _code(event: dict[str, Any]) -> int:
    return int((event.get("responseStatus") or {}).get("code") or 0)


def _drive_every_permission(cluster: Cluster, operator: OperatorProcess, namespace: str, target: str, spare: str) -> None:
    """A drain under a budget with a finished pod and a DaemonSet's pod, through a policy with its Jobs, admission checks, a
    storage-version migration with a leader election from scratch, and the give-back: what the operator
    does in a cluster, each part needing its rules. A rule added to the CSV needs its scenario here."""
    labels = {"app": "lp"}
    # As on a fresh cluster, the remediation Leases' namespace does not exist yet: the operator creates it.
    cluster.kubectl("delete", "namespace", DEFAULT_LEASE_NAMESPACE, "--ignore-not-found", "--timeout=120s")
    # The target's maintenance goes through a policy: its slot, its Jobs, its status.
    install_policy_crd(cluster)
    cluster.kubectl("label", "node", target, f"lp-policy={namespace}")
    apply(cluster, _policy(f"lp-{namespace}", {"lp-policy": namespace}, namespace))
    cluster.kubectl("cordon", spare)
    # The DaemonSet's pod stays once the operator has read that its DaemonSet exists.
    apply(cluster, deployment("lp", namespace, [target, spare], 2, labels), pdb("lp", namespace, labels, maxUnavailable=1),
          pod("done", namespace, target), daemonset("lp-agent", namespace, [target]))
    eventually(lambda: sum(p["status"].get("phase") == "Running" for p in pods_on(cluster, target)) == 4, "4 pods running")
    # A finished pod is deleted, not evicted.
    cluster.kubectl("patch", "pod", "done", "-n", namespace, "--subresource=status", "--type=merge", "-p", '{"status":{"phase":"Succeeded"}}')
    cluster.kubectl("uncordon", spare)
    # The node names a holder that does not exist: the operator looks it up and takes the node over.
    cluster.kubectl("annotate", "node", target, "nodemaintenance.kubevirt.io/holder=gone-maintenance")
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    # The admission check of a control-plane node also reads the etcd quorum guard (a dry run: nothing is taken).
    cluster.kubectl("label", "node", spare, "node-role.kubernetes.io/control-plane=")
    cluster.kubectl("create", "--dry-run=server", "-f", "-", check=False, input=json.dumps(
        {"apiVersion": f"{GROUP}/v1beta1", "kind": KIND, "metadata": {"name": f"nm-{spare}"}, "spec": {"nodeName": spare}}))
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "the drain succeeds", timeout=90)
    # A restart into a CRD that still lists an old stored version: the operator releases its Lease,
    # creates it anew, and rewrites every NodeMaintenance before it sets storedVersions.
    operator.stop()
    cluster.kubectl("delete", "lease", LEASE_NAME, "-n", NAMESPACE, "--ignore-not-found")
    cluster.kubectl("patch", "crd", CRD_NAME, "--subresource=status", "--type=merge", "-p",
                    json.dumps({"status": {"storedVersions": ["v1alpha1", "v1beta1"]}}))
    operator.start()
    eventually(lambda: existing(cluster, "crd", CRD_NAME)["status"]["storedVersions"] == ["v1beta1"], "storage migrated")
    eventually(lambda: get(cluster, "lease", LEASE_NAME, "-n", NAMESPACE), "the Lease created again")
    # A scrape of /metrics: the caller's token reviewed, and whether its user may get /metrics asked.
    assert "node_maintenance_active" in operator.metrics()
    delete_nm(cluster, name)
    eventually(lambda: not existing(cluster, "node", target)["spec"].get("unschedulable"), "the node given back")
    cluster.kubectl("delete", f"{POLICY.plural}.{GROUP}", f"lp-{namespace}")


def test_every_csv_rule_is_needed_and_no_request_is_denied(cluster: Cluster, operator: OperatorProcess, admission_webhook: str,
                                                           namespace: str, nodes: Callable[..., list[str]]) -> None:
    target, spare = nodes(2)
    # Only this test's requests: other tests restart the API server, which denies requests until its RBAC
    # caches are filled again, and run other releases' operators.
    before = len(cluster.audit_events(OPERATOR_USER, every_request=True))
    _drive_every_permission(cluster, operator, namespace, target, spare)
    # Renewals every few seconds update the Lease; wait for one so the log holds it.
    eventually(lambda: any(e["verb"] == "update" and e.get("objectRef", {}).get("resource") == "leases"
                           for e in cluster.audit_events(OPERATOR_USER, every_request=True)[before:]), "a Lease renewal", timeout=15)
    events = [e for e in cluster.audit_events(OPERATOR_USER, every_request=True)[before:] if e.get("objectRef")]
    assert len(events) > 50, "the audit log holds too few of the operator's requests to judge its permissions"
    denied = Counter(f"{e['verb']} {e['requestURI']}" for e in events if _code(e) == 403)
    assert not denied, f"requests of the operator denied by RBAC: {dict(denied)}"
    grants = csv_grants()
    used = {grant: sum(1 for e in events if grant.allows(e)) for grant in grants}
    print("\nCSV grant -> requests of the operator it allowed:\n" + "\n".join(f"  {g}: {n}" for g, n in used.items()))
    unused = [str(g) for g, n in used.items() if n == 0]
    assert not unused, f"the CSV grants what the operator never needed: {unused}; remove these rules from the CSV template"
    ungranted = {f"{e['verb']} {e['requestURI']}" for e in events if not any(g.allows(e) for g in grants)}
    assert not ungranted, f"requests no CSV rule covers (allowed by something else?): {sorted(ungranted)[:5]}"


def test_the_operator_namespace_enforces_restricted_and_the_deployment_passes(cluster: Cluster, operator_kubeconfig: Path) -> None:
    shipped = yaml.safe_load(NAMESPACE_MANIFEST.read_text())
    assert shipped["metadata"]["name"] == NAMESPACE
    assert shipped["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    cluster.kubectl("apply", "-f", str(NAMESPACE_MANIFEST))
    template = csv_install_spec()["deployments"][0]["spec"]["template"]
    manager = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "manager", "namespace": NAMESPACE, **template["metadata"]},
               "spec": template["spec"]}
    admitted = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(manager), check=False)
    assert admitted.returncode == 0 and "PodSecurity" not in admitted.stderr, admitted.stderr
    # The namespace really enforces it: the same pod without its security settings is refused.
    loose = json.loads(json.dumps(manager))
    loose["spec"].pop("securityContext")
    for container in loose["spec"]["containers"]:
        container.pop("securityContext")
    refused = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(loose), check=False)
    assert refused.returncode != 0 and 'violates PodSecurity "restricted:latest"' in refused.stderr, refused.stderr
