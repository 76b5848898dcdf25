"""One install of our package by OLM into a namespace, from the committed deploy manifests, and the
waits a cluster admin would do by hand: approve an InstallPlan, watch the CSV, read the CRD."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any, cast

import yaml

from devcluster.cluster import Cluster
from devcluster.olm import DEPLOY_DIR, INSTALL_PLAN_RETRY_SECONDS, OLM
from devcluster.olm import NAMESPACE as OLM_NAMESPACE
from devcluster.publish import Published
from devcluster.realnode import NAME as REAL_NODE
from node_maintenance.api import CRD_NAME, GROUP

from ...helpers import eventually, get

ROOT = Path(__file__).resolve().parents[4]
PACKAGE = "node-maintenance-operator"
BUNDLE_CRD = ROOT / "bundle" / "manifests" / "nodemaintenance.kubevirt.io_nodemaintenances.yaml"


def csv_name(version: str) -> str:
    return f"{PACKAGE}.v{version}"


def deploy_manifests(namespace: str, *, target_namespaces: list[str] | None = None, **subscription: Any) -> list[dict[str, Any]]:
    """The Namespace, OperatorGroup and Subscription as committed, moved to ``namespace``.

    ``subscription`` overrides Subscription spec fields (startingCSV, installPlanApproval, channel), as an
    admin edits them; ``target_namespaces`` turns the OperatorGroup from AllNamespaces to those namespaces.
    """
    objects = [yaml.safe_load((DEPLOY_DIR / f).read_text()) for f in ("nm-ns.yaml", "nm-op-group.yaml", "nm-sub.yaml")]
    namespace_obj, group, sub = objects
    namespace_obj["metadata"]["name"] = namespace
    for obj in (group, sub):
        obj["metadata"]["namespace"] = namespace
    if target_namespaces is not None:
        group["spec"]["targetNamespaces"] = target_namespaces
    sub["spec"].update(subscription)
    return objects


class Install:
    """What a test does to and reads from one OLM install."""

    def __init__(self, cluster: Cluster, namespace: str, published: Published, olm: OLM) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.published = published
        self.olm = olm

    def apply(self, **options: Any) -> None:
        items = deploy_manifests(self.namespace, **options)
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

    def _get(self, *args: str) -> dict[str, Any] | None:
        return get(self.cluster, *args, "-n", self.namespace)

    def _current_plan(self, version: str) -> dict[str, Any] | None:
        """The InstallPlan for ``version``: the one the Subscription points at if it is for ``version`` (OLM
        may replace a plan it has not started), else the newest such plan (the Subscription moves on)."""
        ref = ((self._get("subscription", PACKAGE) or {}).get("status") or {}).get("installPlanRef")
        plans = [p for p in self.plans() if csv_name(version) in p["spec"]["clusterServiceVersionNames"]]
        referenced = [p for p in plans if ref and p["metadata"]["name"] == ref["name"]]
        chosen = referenced or sorted(plans, key=lambda p: p["metadata"]["creationTimestamp"])
        return chosen[-1] if chosen else None

    def finished_plan_status(self, version: str, timeout: float = INSTALL_PLAN_RETRY_SECONDS + 60) -> dict[str, Any]:
        """The status of the InstallPlan for ``version`` once OLM has finished with it, Complete or Failed: a plan
        that fails is retried for OLM's whole retry window first."""
        def finished() -> dict[str, Any] | None:
            status = (self._current_plan(version) or {}).get("status") or {}
            return status if status.get("phase") in ("Complete", "Failed") else None

        return eventually(finished, f"InstallPlan for {csv_name(version)} Complete or Failed", timeout=timeout)

    def approve(self, version: str) -> None:
        """Approve the pending InstallPlan for ``version``, as an admin does with manual approval."""
        plan = eventually(lambda: self._current_plan(version), f"an InstallPlan for {csv_name(version)}", timeout=120)
        assert plan["spec"]["approval"] == "Manual", plan["spec"]
        self.cluster.kubectl("patch", "installplan", plan["metadata"]["name"], "-n", self.namespace,
                             "--type=merge", "-p", '{"spec":{"approved":true}}')

    def wait_plan_complete(self, version: str, timeout: float = 180) -> dict[str, Any]:
        last: dict[str, Any] = {}

        def complete() -> dict[str, Any] | None:
            plan = self._current_plan(version)
            if plan is None:
                return None
            last.update(plan.get("status") or {})
            if plan["spec"]["approval"] == "Manual" and not plan["spec"]["approved"]:
                self.approve(version)  # a plan OLM regenerated after the first approval
                return None
            phase = last.get("phase")
            assert phase != "Failed", f"InstallPlan for {version} failed: {last.get('conditions')}"
            return plan if phase == "Complete" else None

        try:
            return eventually(complete, f"InstallPlan for {csv_name(version)} Complete", timeout=timeout)
        except AssertionError as error:
            raise AssertionError(f"{error}; phase {last.get('phase')}, conditions {last.get('conditions')}") from None

    def plans(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], (self._get("installplans") or {}).get("items", []))

    def csv(self, version: str) -> dict[str, Any] | None:
        return self._get("csv", csv_name(version))

    def wait_succeeded(self, version: str, timeout: float = 300, *, replacing: str | None = None) -> dict[str, Any]:
        """The CSV reaches Succeeded: OLM's Deployment runs our operator image and its pod is Ready. Bounded as the
        InstallPlan is (300 s): the pod's image is pulled and started on the real node, which a machine building
        images beside the tests slows (180 s ran out at a load average of 22).

        An upgrade is done once the CSV it replaces (``replacing``) is gone too: OLM deletes that one after the new one
        succeeds, and its deletion takes what it owned with it (the webhooks' CA Secret among them), so OLM installs the
        new CSV again with a new pair; until that rollout, the API server refuses the new CA's webhooks (a policy
        applied just after the first Succeeded met "x509: certificate signed by unknown authority")."""
        if replacing is not None:
            eventually(lambda: self.csv(replacing) is None, f"{csv_name(replacing)} replaced by {csv_name(version)}", timeout=timeout)

        def succeeded() -> dict[str, Any] | None:
            csv = self.csv(version)
            phase = (csv or {}).get("status", {}).get("phase")
            assert phase != "Failed", f"CSV {version} failed: {(csv or {}).get('status', {}).get('message')}"
            return csv if phase == "Succeeded" else None

        csv = eventually(succeeded, f"CSV {csv_name(version)} Succeeded", timeout=timeout)
        eventually(self._webhooks_trust_the_pods, f"the webhooks of {csv_name(version)} trusting the pair its pods serve", timeout=timeout)
        return csv

    def _webhooks_trust_the_pods(self) -> bool:
        """Every webhook OLM configured for this namespace names the CA whose pair the Deployment's pods serve, the
        Secret OLM keeps that pair in holds it, and no pod of an earlier rollout is left. OLM may issue a new CA
        while it installs a CSV (when its cache has not seen the Secret it created a moment before, it writes the
        Secret again with a new pair):
        the webhooks then name the new CA while the pods of the earlier rollout, until replaced, serve the old
        pair, and the API server refuses them. For an admin the install is done once that rollout is."""
        deployment = self._get("deployment", PACKAGE)
        if deployment is None:
            return False
        status, replicas = deployment.get("status") or {}, deployment["spec"].get("replicas", 1)
        rolled_out = (status.get("observedGeneration", 0) >= deployment["metadata"]["generation"]
                      and status.get("replicas") == status.get("updatedReplicas") == status.get("availableReplicas") == replicas)
        served = (deployment["spec"]["template"]["metadata"].get("annotations") or {}).get("olmcahash")
        configured = get(self.cluster, "validatingwebhookconfigurations,mutatingwebhookconfigurations",
                          "-l", f"olm.owner.namespace={self.namespace}") or {}
        bundles = [w["clientConfig"].get("caBundle", "") for c in configured.get("items", []) for w in c.get("webhooks", [])]
        conversion = ((get(self.cluster, "crd", CRD_NAME) or {}).get("spec", {}).get("conversion") or {}).get("webhook")
        if conversion and conversion["clientConfig"].get("service", {}).get("namespace") == self.namespace:
            bundles.append(conversion["clientConfig"].get("caBundle", ""))
        named = {hashlib.sha256(base64.b64decode(bundle)).hexdigest() for bundle in bundles}
        # The pair OLM keeps for the webhooks' Service is the one the pods serve: none deleted with a replaced CSV, none
        # written anew that the Deployment does not roll out yet.
        secrets = (self._get("secrets", "-l", "olm.managed=true") or {}).get("items", [])
        kept = {hashes for s in secrets if (hashes := (s["metadata"].get("annotations") or {}).get("olmcahash"))}
        expected = {served} if served else set()  # a release without webhooks has no CA
        return rolled_out and named <= expected and kept == expected

    def operator_pods(self) -> list[dict[str, Any]]:
        pods = (self._get("pods", "-l", f"app.kubernetes.io/name={PACKAGE}") or {}).get("items", [])
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    def assert_operator_image(self, version: str) -> list[dict[str, Any]]:
        """The operator runs as OLM deployed it: as many pods as the release's CSV asks (two from 0.6.0), on the real
        node, every one from the image nmo-pack pushed for ``version``."""
        csv = self.csv(version)
        assert csv is not None, f"CSV {csv_name(version)} missing"
        replicas = csv["spec"]["install"]["spec"]["deployments"][0]["spec"].get("replicas", 1)
        digest = self.published.digest("operator", version)

        def running() -> list[dict[str, Any]] | None:
            own = [p for p in self.operator_pods() if _image_digest(p, "manager") == digest]
            return own if len(own) == replicas else None

        pods = eventually(running, f"the {replicas} operator pod(s) of {version} running its own image")
        assert {p["spec"]["nodeName"] for p in pods} == {REAL_NODE}, [p["spec"].get("nodeName") for p in pods]
        return pods

    def report(self) -> str:
        """What an admin would look at when an install goes wrong: describe of the CSV, InstallPlans and
        Subscription, and the operator's log."""
        parts = []
        for kind in ("csv", "installplan", "subscription"):
            out = self.cluster.kubectl("describe", kind, "-n", self.namespace, check=False)
            parts.append(f"----- describe {kind} -----\n{out.stdout}{out.stderr}")
        logs = self.cluster.kubectl("logs", "-n", self.namespace, "-l", f"app.kubernetes.io/name={PACKAGE}", "--tail=80", check=False)
        parts.append(f"----- operator -----\n{logs.stdout}{logs.stderr}")
        return "\n".join(parts)

    def subscription(self) -> dict[str, Any]:
        sub = self._get("subscription", PACKAGE)
        assert sub is not None, "Subscription missing"
        return sub

    def uninstall(self) -> None:
        """OLM's documented uninstall: delete the Subscription, then the CSV. Done once OLM has let go of the
        Subscription (``OLM.resolved_without_subscriptions``), as the install docs tell an admin to wait before
        subscribing again: a Subscription applied sooner may take the deleted one's status and never install."""
        installed = self.subscription()["status"]["installedCSV"]
        mark = self.olm.resolution_mark()
        self.cluster.kubectl("delete", "subscription", PACKAGE, "-n", self.namespace)
        self.cluster.kubectl("delete", "csv", installed, "-n", self.namespace, "--timeout=60s")
        eventually(lambda: self.olm.resolved_without_subscriptions(self.namespace, mark),
                   f"OLM resolving {self.namespace} without the deleted Subscription")


def _image_digest(pod: dict[str, Any], container: str) -> str | None:
    for status in pod.get("status", {}).get("containerStatuses", []) + pod.get("status", {}).get("initContainerStatuses", []):
        if status["name"] == container and "@" in status.get("imageID", ""):
            return cast(str, status["imageID"].rsplit("@", 1)[1])
    return None


def olm_pods(cluster: Cluster) -> list[dict[str, Any]]:
    """The pods OLM ran in its namespace: the catalog's registry pod and the bundle unpack Jobs' pods."""
    return cast(list[dict[str, Any]], (get(cluster, "pods", "-n", OLM_NAMESPACE) or {}).get("items", []))


def image_digests(pod: dict[str, Any]) -> set[str]:
    statuses = pod.get("status", {}).get("containerStatuses", []) + pod.get("status", {}).get("initContainerStatuses", [])
    return {s["imageID"].rsplit("@", 1)[1] for s in statuses if "@" in s.get("imageID", "")}


def crd(cluster: Cluster) -> dict[str, Any]:
    obj = get(cluster, "crd", CRD_NAME)
    assert obj is not None, "CRD missing"
    return obj


def served_versions(crd_obj: dict[str, Any]) -> list[str]:
    return sorted(v["name"] for v in crd_obj["spec"]["versions"] if v["served"])


def nm_manifest(version: str, name: str, node: str, reason: str) -> dict[str, Any]:
    spec = {"nodeName": node, "reason": reason}
    return {"apiVersion": f"{GROUP}/{version}", "kind": "NodeMaintenance", "metadata": {"name": name}, "spec": spec}


def read_nm(cluster: Cluster, version: str, name: str) -> dict[str, Any] | None:
    """The maintenance read in ``version``; None while it cannot be read in it. During an upgrade OLM gives
    the new operator a new serving certificate and injects its CA into the CRD: until both agree, a read that
    needs the conversion webhook fails, and callers wait for the maintenance to be readable again."""
    result = cluster.kubectl("get", f"nodemaintenances.{version}.{GROUP}", name, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def nm_uid(cluster: Cluster, version: str, name: str) -> str:
    """The uid of the maintenance read in ``version``, which must be readable in it now."""
    obj = read_nm(cluster, version, name)
    assert obj is not None, f"NodeMaintenance {name} cannot be read in {version}"
    return cast(str, obj["metadata"]["uid"])
