"""nmo-pack renders what OLM and the end-to-end tests rely on, reproducibly, and --check catches stale files."""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from node_maintenance.coordination import remediation
from node_maintenance_packaging import bundle, cli
from node_maintenance_packaging.errors import PackagingError
from node_maintenance_packaging.images import check_architectures
from node_maintenance_packaging.render import load_inputs, render_all
from node_maintenance_packaging.templating import DEFAULT_TEMPLATES
from tests.releases import HEAD, NEWEST, RELEASES
from tests.unit.rendering import ROOT, load_yaml, render_bundle

GENERATED = ("bundle", "catalog", "olm-deploy-manifests", "docs", "monitoring", "charts", "bundle.Dockerfile", "catalog.Dockerfile")
CSV = "bundle/manifests/node-maintenance-operator.clusterserviceversion.yaml"
CRD = "bundle/manifests/nodemaintenance.kubevirt.io_nodemaintenances.yaml"
DIGEST = "sha256:" + "ab" * 32
OPERATOR_IMAGE = f"ghcr.io/node-maintenance-operator/node-maintenance-operator:{HEAD}"
HEAD_CSV = f"node-maintenance-operator.v{HEAD}"


def _copy_repo(tmp_path: Path) -> Path:
    """A copy of the inputs and committed outputs, so a test can change them freely."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "releases.yaml", root / "releases.yaml")
    for name in GENERATED:
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, root / name)
    shutil.copytree(DEFAULT_TEMPLATES, root / "templates")
    return root


def test_committed_files_are_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["all", "--check", "--root", str(ROOT)]) == 0, capsys.readouterr().out


def test_render_is_byte_identical_across_runs(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        out.mkdir()
        render_all(out, releases_file=ROOT / "releases.yaml")
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert len(files) > 15
    for rel in files:
        assert (first / rel).read_bytes() == (second / rel).read_bytes(), rel
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())


def test_check_fails_with_a_diff_when_releases_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy_repo(tmp_path)
    args = ["all", "--check", "--root", str(root), "--templates", str(root / "templates")]
    assert cli.main(args) == 0
    releases = root / "releases.yaml"
    created = f'createdAt: "{NEWEST.created_at}"'
    assert created in releases.read_text()
    releases.write_text(releases.read_text().replace(created, 'createdAt: "2000-01-02T00:00:00Z"'))
    capsys.readouterr()
    assert cli.main(args) == 1
    diff = capsys.readouterr().out
    assert "+    createdAt: '2000-01-02T00:00:00Z'" in diff
    assert f"a/{CSV}" in diff


def test_check_fails_when_a_template_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy_repo(tmp_path)
    template = root / "templates" / "deploy" / "nm-sub.yaml.j2"
    template.write_text(template.read_text().replace("installPlanApproval: {{ approval }}", "installPlanApproval: Manual"))
    assert cli.main(["all", "--check", "--root", str(root), "--templates", str(root / "templates")]) == 1
    assert "+  installPlanApproval: Manual" in capsys.readouterr().out


def test_check_reports_stray_files_in_generated_dirs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy_repo(tmp_path)
    (root / "catalog" / "node-maintenance-operator" / "old.yaml").write_text("schema: olm.package\n")
    assert cli.main(["catalog", "--check", "--root", str(root)]) == 1
    assert "old.yaml: not rendered" in capsys.readouterr().out
    assert cli.main(["catalog", "--root", str(root)]) == 0
    assert not (root / "catalog" / "node-maintenance-operator" / "old.yaml").exists()


def test_bundle_dockerfile_labels_equal_the_annotations() -> None:
    annotations = load_yaml(ROOT / "bundle/metadata/annotations.yaml")["annotations"]
    labels = dict(
        line.removeprefix("LABEL ").split("=", 1)
        for line in (ROOT / "bundle.Dockerfile").read_text().splitlines()
        if line.startswith("LABEL ")
    )
    assert labels == annotations
    assert annotations["operators.operatorframework.io.bundle.mediatype.v1"] == "registry+v1"
    assert annotations["operators.operatorframework.io.bundle.channel.default.v1"] == "stable"


def test_each_release_crd_serves_its_versions_and_stores_one(tmp_path: Path) -> None:
    expected = {
        "0.1.0": (["v1alpha1"], "v1alpha1", True),
        "0.2.0": (["v1alpha1", "v1alpha3"], "v1alpha1", False),
        "0.3.0": (["v1alpha1", "v1alpha3", "v1beta1"], "v1beta1", False),
        "0.4.0": (["v1alpha1", "v1alpha3", "v1beta1"], "v1beta1", False),
    }
    for version, (served, storage, strategy_none) in expected.items():
        crd = load_yaml(render_bundle(tmp_path, version) / CRD)
        versions = crd["spec"]["versions"]
        assert [v["name"] for v in versions] == served
        assert [v["name"] for v in versions if v["storage"]] == [storage]
        assert all(v["subresources"] == {"status": {}} for v in versions)
        assert crd["spec"].get("conversion") == ({"strategy": "None"} if strategy_none else None)
        assert crd["spec"]["scope"] == "Cluster" and crd["spec"]["names"]["shortNames"] == ["nm"]


def test_current_crd_deprecates_alphas_and_keeps_node_name_immutable() -> None:
    versions = {v["name"]: v for v in load_yaml(ROOT / CRD)["spec"]["versions"]}
    assert versions["v1alpha1"]["deprecated"] and "v1beta1" in versions["v1alpha1"]["deprecationWarning"]
    assert versions["v1alpha3"]["deprecated"] and "deprecated" not in versions["v1beta1"]
    spec = versions["v1beta1"]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["x-kubernetes-validations"][0]["rule"] == "self.nodeName == oldSelf.nodeName"
    assert versions["v1beta1"]["selectableFields"] == [{"jsonPath": ".spec.nodeName"}]
    assert "csvDescriptor" not in json.dumps(versions)
    assert [c["name"] for c in versions["v1beta1"]["additionalPrinterColumns"]] == ["Node", "Phase", "Progress", "Age"]


def test_webhooks_follow_the_declared_features(tmp_path: Path) -> None:
    hooks = {
        version: {h["type"]: h for h in load_yaml(render_bundle(tmp_path, version) / CSV)["spec"].get("webhookdefinitions", [])}
        for version in ("0.1.0", "0.2.0", "0.3.0")
    }
    assert hooks["0.1.0"] == {}
    assert set(hooks["0.2.0"]) == {"ConversionWebhook"}
    conversion, validation = hooks["0.3.0"]["ConversionWebhook"], hooks["0.3.0"]["ValidatingAdmissionWebhook"]
    assert conversion["webhookPath"] == "/convert"
    assert conversion["conversionCRDs"] == ["nodemaintenances.nodemaintenance.kubevirt.io"]
    assert (conversion["containerPort"], conversion["targetPort"], conversion["deploymentName"]) == (9443, 9443, "node-maintenance-operator")
    assert validation["webhookPath"] == "/validate-nodemaintenance"
    assert validation["failurePolicy"] == "Fail" and validation["sideEffects"] == "None"
    assert validation["rules"][0]["operations"] == ["CREATE"]
    assert validation["rules"][0]["apiVersions"] == ["v1alpha1", "v1alpha3", "v1beta1"]


@pytest.mark.parametrize(("version", "everywhere"), [("0.5.0", False), ("0.6.0", True)])
def test_hook_jobs_are_created_and_watched_in_every_namespace_from_0_6_0(tmp_path: Path, version: str, everywhere: bool) -> None:
    strategy = load_yaml(render_bundle(tmp_path, version) / CSV)["spec"]["install"]["spec"]
    jobs = {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "list", "watch"]}
    assert (jobs in strategy["clusterPermissions"][0]["rules"], jobs in strategy["permissions"][0]["rules"]) == (everywhere, not everywhere)
    assert ("--hook-namespaces" in strategy["deployments"][0]["spec"]["template"]["spec"]["containers"][0]["args"]) == everywhere


def test_with_authorization_the_webhooks_judge_creates_and_updates_in_the_stored_version_and_the_roles_ship(tmp_path: Path) -> None:
    bundle = render_bundle(tmp_path, "0.6.0")
    csv = load_yaml(bundle / CSV)
    judged = {h["webhookPath"]: h for h in csv["spec"]["webhookdefinitions"] if h["type"] == "ValidatingAdmissionWebhook"}
    maintenance, policy = judged["/validate-nodemaintenance"], judged["/validate-nodemaintenancepolicy"]
    assert maintenance["rules"][0]["operations"] == ["CREATE", "UPDATE"] and maintenance["rules"][0]["apiVersions"] == ["v1beta1"]
    assert maintenance["matchPolicy"] == policy["matchPolicy"] == "Equivalent"
    assert "--authorize-authors" in csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0]["args"]
    roles = {load_yaml(path)["metadata"]["name"]: load_yaml(path)["rules"] for path in (bundle / "bundle" / "manifests").glob("*_clusterrole.yaml")}
    assert roles["node-maintenance-escalator"] == [{"apiGroups": ["nodemaintenance.kubevirt.io"], "resources": ["nodemaintenances"], "verbs": ["escalate"]}]
    assert {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]} in roles["node-maintenance-requester"]
    assert not list((render_bundle(tmp_path, "0.5.0") / "bundle" / "manifests").glob("*_clusterrole.yaml")), "earlier releases ship no roles"


def test_csv_install_modes_allow_own_namespace_only_without_conversion(tmp_path: Path) -> None:
    for version, own in (("0.1.0", True), ("0.3.0", False)):
        modes = {m["type"]: m["supported"] for m in load_yaml(render_bundle(tmp_path, version) / CSV)["spec"]["installModes"]}
        assert modes == {"OwnNamespace": own, "SingleNamespace": False, "MultiNamespace": False, "AllNamespaces": True}


def test_csv_rbac_is_exactly_the_operators_needs() -> None:
    strategy = load_yaml(ROOT / CSV)["spec"]["install"]["spec"]
    cluster = {
        (group, resource, tuple(rule.get("resourceNames", ()))): set(rule["verbs"])
        for rule in strategy["clusterPermissions"][0]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    # That each of these is used is proved from the audit log by tests/e2e/test_least_privilege.py.
    assert cluster == {
        ("nodemaintenance.kubevirt.io", "nodemaintenances", ()): {"get", "list", "watch", "update", "patch"},
        ("nodemaintenance.kubevirt.io", "nodemaintenances/status", ()): {"patch"},
        ("nodemaintenance.kubevirt.io", "nodemaintenancepolicies", ()): {"list", "watch"},
        ("nodemaintenance.kubevirt.io", "nodemaintenancepolicies/status", ()): {"patch"},
        ("", "nodes", ()): {"get", "list", "watch", "patch"},
        ("", "pods", ()): {"list", "watch", "delete"},
        ("coordination.k8s.io", "leases", ()): {"get", "create", "update", "delete"},  # remediation Leases, any namespace
        ("", "namespaces", ()): {"create"},  # the remediation Lease namespace when missing
        ("", "pods/eviction", ()): {"create"},
        ("policy", "poddisruptionbudgets", ()): {"get", "list", "watch"},
        ("apps", "daemonsets", ()): {"get"},  # whether a DaemonSet pod's DaemonSet still exists
        ("apps", "replicasets", ()): {"list", "watch"},  # waitForHealthy: the evicted pods' workloads
        ("apps", "statefulsets", ()): {"list", "watch"},
        ("", "events", ()): {"create"},
        ("authorization.k8s.io", "subjectaccessreviews", ()): {"create"},  # whether an author may do what their object asks
        ("authentication.k8s.io", "tokenreviews", ()): {"create"},  # who a scraper of /metrics is
        ("batch", "jobs", ()): {"create", "list", "watch"},  # hook Jobs, in the namespace each hook names (never the operator's)
        ("apiextensions.k8s.io", "customresourcedefinitions", ("nodemaintenances.nodemaintenance.kubevirt.io",
                                                             "nodemaintenancepolicies.nodemaintenance.kubevirt.io")): {"get"},
        ("apiextensions.k8s.io", "customresourcedefinitions/status", ("nodemaintenances.nodemaintenance.kubevirt.io",)): {"patch"},
    }
    assert strategy["permissions"][0]["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
    ]
    assert "*" not in json.dumps(strategy["clusterPermissions"]) + json.dumps(strategy["permissions"])


def test_csv_deployment_is_restricted_and_probed() -> None:
    csv = load_yaml(ROOT / CSV)
    deployment = csv["spec"]["install"]["spec"]["deployments"][0]
    assert deployment["name"] == "node-maintenance-operator"
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert "command" not in container  # the image's entry point runs the operator
    assert container["image"] == csv["metadata"]["annotations"]["containerImage"] == OPERATOR_IMAGE
    assert container["env"][0] == {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
    assert {"name": "REMEDIATION_LEASE_NAMESPACE", "value": "medik8s-leases"} in container["env"]
    assert (container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"]) == (
        {"path": "/healthz", "port": 8081},
        {"path": "/readyz", "port": 8081},
    )
    # A replica that starts slowly on a busy node is not restarted by its liveness probe before it first answers.
    startup = container["startupProbe"]
    assert startup["httpGet"] == {"path": "/healthz", "port": 8081} and startup["periodSeconds"] * startup["failureThreshold"] >= 300
    assert all(container[probe]["timeoutSeconds"] >= 5 for probe in ("startupProbe", "livenessProbe", "readinessProbe"))
    assert {p["containerPort"] for p in container["ports"]} == {9443, 8081, 8443}
    assert container["securityContext"] == {
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert set(container["resources"]) == {"requests", "limits"}
    assert csv["spec"]["relatedImages"] == [{"name": "operator", "image": container["image"]}]


def test_csv_lists_an_example_and_descriptors_for_every_served_version() -> None:
    csv = load_yaml(ROOT / CSV)
    examples = json.loads(csv["metadata"]["annotations"]["alm-examples"])
    owned = csv["spec"]["customresourcedefinitions"]["owned"]
    assert sorted({(e["kind"], e["apiVersion"].split("/")[1]) for e in examples}) == sorted((o["kind"], o["version"]) for o in owned) == [
        ("NodeMaintenance", "v1alpha1"), ("NodeMaintenance", "v1alpha3"), ("NodeMaintenance", "v1beta1"), ("NodeMaintenancePolicy", "v1beta1")
    ]
    for crd in (o for o in owned if o["kind"] == "NodeMaintenance"):
        node_name = next(d for d in crd["specDescriptors"] if d["path"] == "nodeName")
        assert node_name["x-descriptors"] == ["urn:alm:descriptor:io.kubernetes:Node"]
        assert any(d["path"] == "phase" for d in crd["statusDescriptors"])
    assert csv["metadata"]["annotations"]["olm.skipRange"] == NEWEST.skip_range
    assert csv["spec"]["replaces"] == f"node-maintenance-operator.v{NEWEST.replaces}"
    assert base64.b64decode(csv["spec"]["icon"][0]["base64data"]).startswith(b"<svg")


@pytest.mark.parametrize(("version", "first"), [("0.5.0", "v1alpha1"), ("0.6.0", "v1beta1")])
def test_from_0_6_0_the_csv_lists_the_stored_version_first(tmp_path: Path, version: str, first: str) -> None:
    csv = load_yaml(render_bundle(tmp_path, version) / CSV)
    examples = json.loads(csv["metadata"]["annotations"]["alm-examples"])
    owned = csv["spec"]["customresourcedefinitions"]["owned"]
    assert examples[0]["apiVersion"] == f"nodemaintenance.kubevirt.io/{first}" and owned[0]["version"] == first
    if first == "v1beta1":  # the deprecated versions after it, the newest first
        assert [o["version"] for o in owned if o["kind"] == "NodeMaintenance"] == ["v1beta1", "v1alpha3", "v1alpha1"]
        assert any(d["path"] == "drain" for d in owned[0]["specDescriptors"]), "the first owned entry describes every example field"


def test_the_suggested_namespace_template_is_the_namespace_the_deploy_manifests_create(tmp_path: Path) -> None:
    annotations = load_yaml(render_bundle(tmp_path, "0.6.0") / CSV)["metadata"]["annotations"]
    template = json.loads(annotations["operatorframework.io/suggested-namespace-template"])
    assert template == load_yaml(ROOT / "olm-deploy-manifests/kubernetes/nm-ns.yaml")
    assert template["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert template["metadata"]["name"] == annotations["operatorframework.io/suggested-namespace"]
    earlier = load_yaml(render_bundle(tmp_path, "0.5.0") / CSV)["metadata"]["annotations"]
    assert "operatorframework.io/suggested-namespace-template" not in earlier


@pytest.mark.parametrize(("min_kube", "versions"), [("1.30.0", "v4.17"), ("1.31.2", "v4.18"), ("1.14.0", "v4.1")])
def test_the_openshift_versions_follow_min_kube_version(min_kube: str, versions: str) -> None:
    assert bundle.openshift_versions(min_kube) == versions


def test_a_min_kube_version_older_than_any_openshift_4_is_refused() -> None:
    with pytest.raises(PackagingError, match=r"minKubeVersion: 1.13.0 predates OpenShift 4.1 \(Kubernetes 1.13\); raise it to 1.14.0"):
        bundle.openshift_versions("1.13.0")


def test_from_0_6_0_the_bundle_names_the_openshift_versions(tmp_path: Path) -> None:
    annotations = {version: load_yaml(render_bundle(tmp_path, version) / "bundle/metadata/annotations.yaml")["annotations"]
                   for version in ("0.5.0", "0.6.0")}
    assert annotations["0.6.0"]["com.redhat.openshift.versions"] == "v4.17"  # minKubeVersion 1.30.0
    assert "com.redhat.openshift.versions" not in annotations["0.5.0"]


def test_from_0_6_0_the_csv_labels_the_os_and_every_architecture_the_images_are_built_for(tmp_path: Path) -> None:
    labels = {version: load_yaml(render_bundle(tmp_path, version) / CSV)["metadata"].get("labels") for version in ("0.5.0", "0.6.0")}
    assert labels == {"0.5.0": None, "0.6.0": {"operatorframework.io/os.linux": "supported", "operatorframework.io/arch.amd64": "supported"}}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda text: text.replace("architectures: [amd64]", "architectures: [amd64, x86_64]"),
         "release 0.6.0: architectures: 'x86_64' is not a platform OperatorHub lists; use Go's names, any of amd64, arm64, ppc64le, s390x"),
        (lambda text: text.replace("    architectures: [amd64]\n", ""),
         ("release 0.6.0: architectures: missing, and the listing feature labels the CSV with them; list those its images are built for, "
          "e.g. architectures: [amd64]")),
        (lambda text: text.replace("scorecard: v1.42.2", "scorecard: v1.42"),
         "release 0.6.0: scorecard: 'v1.42' is not an operator-sdk release; name the one whose scorecard-test image runs the suites, e.g. v1.42.2"),
    ],
    ids=["unknown architecture", "no architectures with listing", "scorecard not a release"],
)
def test_bad_platforms_and_scorecards_are_refused_with_the_field_and_the_fix(tmp_path: Path, edit: Callable[[str], str], message: str) -> None:
    root = _copy_repo(tmp_path)
    releases = root / "releases.yaml"
    edited = edit(releases.read_text())
    assert edited != releases.read_text()
    releases.write_text(edited)
    with pytest.raises(PackagingError, match=re.escape(message)):
        load_inputs(releases)


@pytest.mark.parametrize(("machine", "refused"), [("x86_64", False), ("aarch64", True)])
def test_images_are_built_only_on_a_host_of_the_architectures_their_release_declares(machine: str, refused: bool) -> None:
    """Every builder here makes the host's architecture: built elsewhere, the CSV's labels would offer the operator to
    nodes it cannot run on."""
    if not refused:
        check_architectures([NEWEST], machine)
        return
    with pytest.raises(PackagingError, match=re.escape(
            "release 0.6.0: architectures: ['amd64'], but this host builds arm64 images only; "
            "build it on a host of that architecture, or declare [arm64]")):
        check_architectures([NEWEST], machine)


def test_from_0_6_0_the_operator_survives_a_drain_of_its_own_node(tmp_path: Path) -> None:
    """Two replicas kept apart, a budget that keeps one of them, a priority class and the control-plane tolerations:
    what lets a rolling maintenance of every node drain the node the operator runs on."""
    budget_file = f"bundle/manifests/{bundle.DISRUPTION_BUDGET_FILE}"
    deployments = {}
    for version in ("0.5.0", "0.6.0"):
        root = render_bundle(tmp_path, version)
        deployments[version] = load_yaml(root / CSV)["spec"]["install"]["spec"]["deployments"][0]
        assert (root / budget_file).exists() == (version == "0.6.0")
    new, old = deployments["0.6.0"], deployments["0.5.0"]
    pod = new["spec"]["template"]["spec"]
    assert (new["spec"]["replicas"], old["spec"]["replicas"]) == (2, 1)
    assert pod["priorityClassName"] == "system-cluster-critical" and "priorityClassName" not in old["spec"]["template"]["spec"]
    assert {(t["key"], t["effect"]) for t in pod["tolerations"]} == {("node-role.kubernetes.io/control-plane", "NoSchedule"),
                                                                      ("node-role.kubernetes.io/master", "NoSchedule")}
    (spread,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert spread["podAffinityTerm"]["labelSelector"]["matchLabels"] == new["spec"]["selector"]["matchLabels"]
    budget = load_yaml(tmp_path / "0.6.0" / budget_file)
    assert budget["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": new["spec"]["selector"]["matchLabels"]}}


def test_from_0_6_0_only_the_webhooks_and_prometheus_reach_the_operator_s_pods(tmp_path: Path) -> None:
    """The NetworkPolicy selects the pods the CSV's Deployment makes; it opens the port the webhooks are served on
    to anyone (the API server has no selector), the metrics Service's port to the monitoring namespaces only, and
    nothing else: the health port is left to the kubelet, which a NetworkPolicy never stops."""
    policy_file = f"bundle/manifests/{bundle.NETWORK_POLICY_FILE}"
    assert not (render_bundle(tmp_path, "0.5.0") / policy_file).exists()
    root = render_bundle(tmp_path, "0.6.0")
    csv = load_yaml(root / CSV)
    pod_labels = csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["metadata"]["labels"]
    webhook_ports = {webhook["containerPort"] for webhook in csv["spec"]["webhookdefinitions"]}
    (metrics_port,) = [port["targetPort"] for port in load_yaml(root / f"bundle/manifests/{bundle.METRICS_SERVICE_FILE}")["spec"]["ports"]]
    policy = load_yaml(root / policy_file)["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    opened = {(port["port"], tuple(sorted(next(iter(peer["namespaceSelector"]["matchLabels"].items())) for peer in rule.get("from", ()))))
              for rule in policy["ingress"] for port in rule["ports"]}
    monitoring = (("metrics", "enabled"), ("network.openshift.io/policy-group", "monitoring"))  # kubebuilder's, OpenShift's
    assert opened == {*((port, ()) for port in webhook_ports), (metrics_port, monitoring)}


def test_catalog_channels_have_one_head_and_bundles_carry_their_csv_s_metadata_alone() -> None:
    docs = list(yaml.safe_load_all((ROOT / "catalog/node-maintenance-operator/index.yaml").read_text()))
    package = next(d for d in docs if d["schema"] == "olm.package")
    channels = [d for d in docs if d["schema"] == "olm.channel"]
    assert package["defaultChannel"] == "stable" and {c["name"] for c in channels} >= {"stable", "candidate"}
    for channel in channels:
        names = {e["name"] for e in channel["entries"]}
        replaced = {e["replaces"] for e in channel["entries"] if "replaces" in e}
        assert replaced <= names
        assert names - replaced == {HEAD_CSV}
    for version in RELEASES:
        bundle = load_yaml(ROOT / f"catalog/node-maintenance-operator/bundles/node-maintenance-operator.v{version}.yaml")
        assert bundle["image"] == f"ghcr.io/node-maintenance-operator/node-maintenance-operator-bundle:v{version}"
        # OpenShift's catalogs from 4.17 on take the CSV's metadata, not the manifests embedded whole.
        assert {p["type"] for p in bundle["properties"]} == {"olm.package", "olm.gvk", "olm.csv.metadata"}
    (metadata,) = [p["value"] for p in load_yaml(ROOT / f"catalog/node-maintenance-operator/bundles/{HEAD_CSV}.yaml")["properties"]
                   if p["type"] == "olm.csv.metadata"]
    csv = load_yaml(ROOT / "bundle/manifests/node-maintenance-operator.clusterserviceversion.yaml")
    assert metadata["labels"] == csv["metadata"]["labels"] and metadata["annotations"] == csv["metadata"]["annotations"]
    assert metadata["crdDescriptions"] == csv["spec"]["customresourcedefinitions"]
    assert {key: metadata[key] for key in ("description", "displayName", "installModes", "minKubeVersion")} == {
        key: csv["spec"][key] for key in ("description", "displayName", "installModes", "minKubeVersion")}


def test_stable_skips_to_the_head_and_candidate_steps_through_every_release() -> None:
    docs = list(yaml.safe_load_all((ROOT / "catalog/node-maintenance-operator/index.yaml").read_text()))
    entries = {d["name"]: {e["name"]: e for e in d["entries"]} for d in docs if d["schema"] == "olm.channel"}
    assert entries["stable"][HEAD_CSV]["skipRange"] == NEWEST.skip_range
    for entry in entries["candidate"].values():
        assert "skipRange" not in entry and "skips" not in entry, entry
    assert entries["candidate"][HEAD_CSV]["replaces"] == f"node-maintenance-operator.v{NEWEST.replaces}"


def test_stepwise_channels_must_be_declared_channels(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    releases = root / "releases.yaml"
    releases.write_text(releases.read_text().replace("stepwiseChannels: [candidate]", "stepwiseChannels: [beta]"))
    with pytest.raises(PackagingError, match=r"stepwiseChannels: 'beta' is not in channels"):
        load_inputs(releases)


def test_deploy_manifests_target_each_platforms_catalog_namespace(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    image = "registry.example/nmo-catalog:v9"
    assert cli.main(["deploy", "--root", str(root), "--catalog-image", image, "--version", "0.2.0"]) == 0
    for platform, namespace in (("kubernetes", "olm"), ("openshift", "openshift-marketplace")):
        source = load_yaml(root / f"olm-deploy-manifests/{platform}/nm-catalog-source.yaml")
        subscription = load_yaml(root / f"olm-deploy-manifests/{platform}/nm-sub.yaml")
        assert (source["metadata"]["namespace"], source["spec"]["image"], source["spec"]["sourceType"]) == (namespace, image, "grpc")
        assert subscription["spec"]["sourceNamespace"] == namespace
        assert subscription["spec"]["startingCSV"] == "node-maintenance-operator.v0.2.0"
        assert subscription["spec"]["channel"] == "stable"


def test_pinned_digests_replace_tags_everywhere(tmp_path: Path) -> None:
    bundle = f"ghcr.io/node-maintenance-operator/node-maintenance-operator-bundle:v{HEAD}"
    render_all(tmp_path, releases_file=ROOT / "releases.yaml", digests={OPERATOR_IMAGE: DIGEST, bundle: DIGEST})
    csv_text = (tmp_path / CSV).read_text()
    assert f"ghcr.io/node-maintenance-operator/node-maintenance-operator@{DIGEST}" in csv_text and OPERATOR_IMAGE not in csv_text
    catalog_bundle = load_yaml(tmp_path / f"catalog/node-maintenance-operator/bundles/{HEAD_CSV}.yaml")
    assert catalog_bundle["image"] == f"ghcr.io/node-maintenance-operator/node-maintenance-operator-bundle@{DIGEST}"


def test_registry_flag_renames_every_image(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    assert cli.main(["all", "--root", str(root), "--registry", "registry.example/team"]) == 0
    rendered = "".join(p.read_text() for p in root.rglob("*.yaml"))
    assert "ghcr.io/node-maintenance-operator/node-maintenance-operator" not in rendered
    assert re.search(r"registry\.example/team/node-maintenance-operator-catalog:v0", rendered)


@pytest.mark.parametrize(
    ("digests", "message"),
    [
        ({"ghcr.io/node-maintenance-operator/unknown:1": DIGEST}, "which no release references"),
        ({"ghcr.io/node-maintenance-operator/node-maintenance-operator:0.3.0": "sha256:short"}, "sha256:<64 hex digits>"),
    ],
)
def test_bad_digest_pins_are_refused(digests: dict[str, str], message: str) -> None:
    with pytest.raises(PackagingError, match=re.escape(message)):
        load_inputs(ROOT / "releases.yaml", digests=digests)


def test_committed_artifacts_name_only_images_this_project_builds() -> None:
    """Every image the bundle, the catalog, the deploy manifests and the Dockerfiles name is under the
    registry releases.yaml names, the one this project publishes to; but for the scorecard's configuration,
    which names upstream's test image, run by a certification and never by a cluster the operator serves."""
    registry = yaml.safe_load((ROOT / "releases.yaml").read_text())["registry"]
    found: list[str] = []

    def images(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("image", "containerImage") and isinstance(value, str):
                    found.append(value)
                images(value)
        elif isinstance(node, list):
            for item in node:
                images(item)

    for top in ("bundle", "catalog", "olm-deploy-manifests"):
        for path in (p for p in (ROOT / top).rglob("*.yaml") if p != ROOT / "bundle/tests/scorecard/config.yaml"):
            for doc in yaml.safe_load_all(path.read_text()):
                images(doc)
    for dockerfile in ("bundle.Dockerfile", "catalog.Dockerfile"):
        found += [line.split("=", 1)[1] for line in (ROOT / dockerfile).read_text().splitlines() if line.startswith("ARG ") and "IMAGE=" in line]
    assert len(found) > 10
    assert [image for image in found if not image.startswith(registry + "/")] == []


def test_the_opm_version_is_the_pinned_one() -> None:
    from node_maintenance_packaging.catalog import OPM_VERSION

    assert f"github.com/operator-framework/operator-registry {OPM_VERSION}" in (ROOT / "hack/tools/opm/go.mod").read_text()


def test_the_newest_release_s_scorecard_is_the_operator_sdk_release_the_tools_pin() -> None:
    """So the scorecard-test image the tests build is the release of it the newest bundle's configuration names."""
    assert NEWEST.scorecard is not None
    assert f"github.com/operator-framework/operator-sdk {NEWEST.scorecard} " in (ROOT / "hack/tools/scorecard-test/go.mod").read_text()


def test_from_0_6_0_the_bundle_ships_the_scorecard_s_basic_and_olm_suites_in_upstream_s_test_image(tmp_path: Path) -> None:
    """The configuration certification reads (tests/scorecard/, named by the bundle's annotations and labels), each
    test in upstream's scorecard-test image of the operator-sdk release the release names."""
    config_file = "bundle/tests/scorecard/config.yaml"
    old, new = render_bundle(tmp_path, "0.5.0"), render_bundle(tmp_path, "0.6.0")
    assert not (old / "bundle/tests").exists()
    assert "operators.operatorframework.io.test.config.v1" not in load_yaml(old / "bundle/metadata/annotations.yaml")["annotations"]
    annotations = load_yaml(new / "bundle/metadata/annotations.yaml")["annotations"]
    assert (annotations["operators.operatorframework.io.test.mediatype.v1"], annotations["operators.operatorframework.io.test.config.v1"]) == (
        "scorecard+v1", "tests/scorecard/")
    assert "COPY bundle/tests/scorecard/ /tests/scorecard/" in (new / "bundle.Dockerfile").read_text().splitlines()
    config = load_yaml(new / config_file)
    assert (config["apiVersion"], config["kind"]) == ("scorecard.operatorframework.io/v1alpha3", "Configuration")
    tests = [test for stage in config["stages"] for test in stage["tests"]]
    assert {(t["labels"]["suite"], t["labels"]["test"], t["entrypoint"][1]) for t in tests} == {
        ("basic", "basic-check-spec-test", "basic-check-spec"), ("olm", "olm-bundle-validation-test", "olm-bundle-validation"),
        ("olm", "olm-crds-have-validation-test", "olm-crds-have-validation"), ("olm", "olm-crds-have-resources-test", "olm-crds-have-resources"),
        ("olm", "olm-spec-descriptors-test", "olm-spec-descriptors"), ("olm", "olm-status-descriptors-test", "olm-status-descriptors")}
    assert {t["image"] for t in tests} == {"quay.io/operator-framework/scorecard-test:v1.42.2"}
    assert (ROOT / config_file).read_text() == (new / config_file).read_text()


def test_a_release_with_the_remediation_feature_grants_the_lease_rules_and_names_the_namespace(tmp_path: Path) -> None:
    """The CSV's RBAC and setting come from the one template, for the releases declaring the feature only."""
    doc = yaml.safe_load((ROOT / "releases.yaml").read_text())
    newest = doc["releases"][-1]
    newest["features"] = sorted(set(newest["features"]) | {"remediation"})
    (tmp_path / "releases.yaml").write_text(yaml.safe_dump(doc))

    def csv(version: str) -> dict[str, Any]:
        out = tmp_path / version
        assert cli.main(["bundle", "--root", str(tmp_path), "--release", version, "--out", str(out)]) == 0
        loaded: dict[str, Any] = yaml.safe_load((out / "bundle" / "manifests" / "node-maintenance-operator.clusterserviceversion.yaml").read_text())
        return loaded

    def rules_and_env(manifest: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        install = manifest["spec"]["install"]["spec"]
        return install["clusterPermissions"][0]["rules"], install["deployments"][0]["spec"]["template"]["spec"]["containers"][0]["env"]

    rules, env = rules_and_env(csv(newest["version"]))
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update", "delete"]} in rules
    assert {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create"]} in rules
    assert {"name": remediation.LEASE_NAMESPACE_ENV, "value": remediation.DEFAULT_LEASE_NAMESPACE} in env
    before, env_before = rules_and_env(csv(doc["releases"][0]["version"]))
    assert not any("leases" in r["resources"] or "namespaces" in r["resources"] for r in before)
    assert all(e["name"] != remediation.LEASE_NAMESPACE_ENV for e in env_before)
