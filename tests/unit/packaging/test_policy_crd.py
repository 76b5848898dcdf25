"""Release 0.4.0 owns a second CRD, the NodeMaintenancePolicy: bundle, CSV, catalog and checks carry it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import semver

from node_maintenance import api
from tests.releases import HEAD, NEXT, RELEASES
from tests.unit.rendering import ROOT, append_release, load_yaml, render_bundle, render_edited

CSV = "bundle/manifests/node-maintenance-operator.clusterserviceversion.yaml"
POLICY_CRD = "bundle/manifests/nodemaintenance.kubevirt.io_nodemaintenancepolicies.yaml"


def test_the_policy_crd_is_cluster_scoped_v1beta1_from_its_schema() -> None:
    crd = load_yaml(ROOT / POLICY_CRD)
    assert crd["metadata"]["name"] == api.POLICY.crd_name == "nodemaintenancepolicies.nodemaintenance.kubevirt.io"
    assert crd["spec"]["scope"] == "Cluster" and crd["spec"]["names"]["shortNames"] == ["nmp"]
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1beta1", True, True)
    assert version["schema"]["openAPIV3Schema"] == api.POLICY.openapi_schema("v1beta1")
    assert "csvDescriptor" not in json.dumps(crd) and version["subresources"] == {"status": {}}


def test_the_csv_owns_both_crds_with_descriptors_and_an_example_policy() -> None:
    csv = load_yaml(ROOT / CSV)
    owned = {(o["kind"], o["version"]): o for o in csv["spec"]["customresourcedefinitions"]["owned"]}
    policy = owned[("NodeMaintenancePolicy", "v1beta1")]
    assert policy["name"] == api.POLICY.crd_name and policy["displayName"] == "Node Maintenance Policy"
    assert {d["path"] for d in policy["specDescriptors"]} >= {"nodeSelector", "maxParallel", "maxUnavailable", "preDrain", "drainRules"}
    assert {d["path"] for d in policy["statusDescriptors"]} >= {"queue", "inMaintenance", "conditions"}
    assert {r["kind"] for r in policy["resources"]} == {"Node", "Job"}
    examples = json.loads(csv["metadata"]["annotations"]["alm-examples"])
    example = next(e for e in examples if e["kind"] == "NodeMaintenancePolicy")
    assert example["apiVersion"] == "nodemaintenance.kubevirt.io/v1beta1" and example["spec"]["maxParallel"] == 2
    assert "NodeMaintenancePolicy" in csv["spec"]["description"]


def test_the_csv_validates_policies_as_they_are_written_and_runs_the_operator_as_the_account_they_may_not_name() -> None:
    spec = load_yaml(ROOT / CSV)["spec"]
    webhook = next(w for w in spec["webhookdefinitions"] if w.get("webhookPath") == "/validate-nodemaintenancepolicy")
    assert webhook["type"] == "ValidatingAdmissionWebhook" and webhook["failurePolicy"] == "Fail"
    assert webhook["rules"] == [{"apiGroups": [api.GROUP], "apiVersions": ["v1beta1"], "operations": ["CREATE", "UPDATE"],
                                 "resources": ["nodemaintenancepolicies"], "scope": "Cluster"}]  # not the status its operator writes
    install = spec["install"]["spec"]
    accounts = {install["deployments"][0]["spec"]["template"]["spec"]["serviceAccountName"],
                *(entry["serviceAccountName"] for entry in install["clusterPermissions"] + install["permissions"])}
    assert accounts == {api.SERVICE_ACCOUNT}


def test_older_releases_stay_without_the_policy_crd_and_its_permissions(tmp_path: Path) -> None:
    bundle = render_bundle(tmp_path, "0.3.0")
    assert not (bundle / POLICY_CRD).exists()
    csv = load_yaml(bundle / CSV)
    assert "nodemaintenancepolicies" not in json.dumps(csv) and "jobs" not in json.dumps(csv["spec"]["install"])


def test_the_catalog_lists_the_policy_gvk_and_both_owned_crds_from_0_4_0_on() -> None:
    def kinds(version: str) -> tuple[set[str], set[str]]:
        bundle = load_yaml(ROOT / f"catalog/node-maintenance-operator/bundles/node-maintenance-operator.v{version}.yaml")
        gvks = {p["value"]["kind"] for p in bundle["properties"] if p["type"] == "olm.gvk"}
        (metadata,) = [p["value"] for p in bundle["properties"] if p["type"] == "olm.csv.metadata"]
        return gvks, {owned["name"] for owned in metadata["crdDescriptions"]["owned"]}

    for version in RELEASES:
        policy = semver.Version.parse(version) >= semver.Version.parse("0.4.0")
        assert kinds(version) == ({"NodeMaintenance", *(["NodeMaintenancePolicy"] if policy else [])},
                                  {api.CRD_NAME, *([api.POLICY.crd_name] if policy else [])}), version


NEXT_RELEASE = f"""  - version: {NEXT}
    createdAt: "2026-03-01T00:00:00Z"
    maturity: beta
    channels: [stable, candidate]
    served: [v1alpha1, v1alpha3, v1beta1]
    storage: v1beta1
    features: [conversion, validation]
    {{owns}}
    replaces: {HEAD}
    relatedImages: [operator]
"""


@pytest.mark.parametrize(
    ("owns", "message"),
    [
        ("owns: {}", f"release {NEXT}: owns.NodeMaintenancePolicy: no longer owns the NodeMaintenancePolicy CRD, which {HEAD} owns"),
        ("owns: {NodeMaintenancePolicy: {served: [v1alpha1], storage: v1alpha1}}",
         f"release {NEXT}: owns.NodeMaintenancePolicy.served: 'v1alpha1' has no NodeMaintenancePolicy schema; use versions from v1beta1"),
        ("owns: {Widget: {served: [v1beta1], storage: v1beta1}}", f"release {NEXT}: owns: 'Widget' is not a kind of this operator"),
        ("owns: {NodeMaintenancePolicy: {served: [v1beta1]}}", f"release {NEXT}: owns.NodeMaintenancePolicy.storage: missing"),
        ("owns: {NodeMaintenance: {served: [v1beta1], storage: v1beta1}}", "declared by the release's served and storage"),
    ],
)
def test_bad_owned_crds_are_refused_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str], owns: str, message: str) -> None:
    code, err = render_edited(tmp_path, lambda t: append_release(t, NEXT_RELEASE.format(owns=owns)), capsys)
    assert code == 2 and message in err, err
    assert "Traceback" not in err
