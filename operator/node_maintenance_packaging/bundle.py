"""One release's registry+v1 bundle: manifests, metadata, operator-sdk scorecard's configuration (tests/scorecard/)
for a release that names its scorecard, and its Dockerfile."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import semver

from node_maintenance import api
from node_maintenance.api import roles

from . import yamlout
from .clusterserviceversion import CSV_FILE, DEPLOYMENT, HEALTH_PORT, METRICS_PORT, WEBHOOK_PORT, build_csv
from .crd import build_crds
from .errors import PackagingError
from .files import Output, RenderedFile
from .imagerefs import ImageRefs
from .releases import Release, Releases
from .templating import Templates

METRICS_SERVICE_FILE = "node-maintenance-operator-metrics_v1_service.yaml"
DISRUPTION_BUDGET_FILE = "node-maintenance-operator_policy_v1_poddisruptionbudget.yaml"
NETWORK_POLICY_FILE = "node-maintenance-operator_networking.k8s.io_v1_networkpolicy.yaml"
# Namespace labels that say Prometheus runs there, and may read /metrics through the NetworkPolicy: the one
# kubebuilder's scaffolding uses, and the one OpenShift gives its monitoring namespaces.
MONITORING_NAMESPACE_LABELS = (("metrics", "enabled"), ("network.openshift.io/policy-group", "monitoring"))
# operator-sdk scorecard's tests image, upstream's, of the operator-sdk release a release names (`scorecard`): the
# configuration names it as operator-sdk's own scaffolding does, so that certification runs it from the bundle.
SCORECARD_IMAGE = "quay.io/operator-framework/scorecard-test"
SCORECARD_CONFIG_DIR = "tests/scorecard/"
# The basic and olm suites, by suite and test, which Red Hat's certification (preflight) runs from the bundle's
# configuration with these labels.
SCORECARD_TESTS = (("basic", "basic-check-spec"), ("olm", "olm-bundle-validation"), ("olm", "olm-crds-have-validation"),
                   ("olm", "olm-crds-have-resources"), ("olm", "olm-spec-descriptors"), ("olm", "olm-status-descriptors"))


def _roles(templates: Templates, release: Release) -> dict[str, dict[str, Any]]:
    """The ClusterRoles an admin binds: with authorization, to let a person request maintenance and escalate; with
    secure metrics, to let a scraper read /metrics."""
    names = {"requester": roles.REQUESTER_ROLE, "escalator": roles.ESCALATOR_ROLE, "metrics_reader": roles.METRICS_READER_ROLE,
             "group": api.GROUP, "plural": api.PLURAL, "escalate": roles.ESCALATE_VERB}
    shipped = ((roles.REQUESTER_ROLE, roles.ESCALATOR_ROLE) if release.has("authorization") else ()) + (
        (roles.METRICS_READER_ROLE,) if release.has("secure-metrics") else ())
    return {f"{name}_rbac.authorization.k8s.io_v1_clusterrole.yaml": templates.yaml("roles.yaml.j2", role=name, **names) for name in shipped}


def openshift_versions(min_kube_version: str) -> str:
    """The OpenShift releases a bundle may be listed in (``com.redhat.openshift.versions``): from the one that ships
    ``min_kube_version`` on (OpenShift 4.N ships Kubernetes 1.(N+13), since 4.1 shipped 1.13), as ``v4.N``, which
    OpenShift's pipelines read as that release and every later one."""
    kube = semver.Version.parse(min_kube_version)
    if kube.major != 1 or kube.minor < 14:
        raise PackagingError(f"releases.yaml: minKubeVersion: {min_kube_version} predates OpenShift 4.1 (Kubernetes 1.13); "
                             "raise it to 1.14.0 or later")
    return f"v4.{kube.minor - 13}"


def bundle_annotations(releases: Releases, release: Release) -> dict[str, str]:
    """metadata/annotations.yaml, which the bundle image also carries as labels."""
    listing = {"com.redhat.openshift.versions": openshift_versions(releases.min_kube_version)} if release.has("listing") else {}
    scorecard = {"operators.operatorframework.io.test.mediatype.v1": "scorecard+v1",
                 "operators.operatorframework.io.test.config.v1": SCORECARD_CONFIG_DIR} if release.scorecard else {}
    return {
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": releases.package,
        "operators.operatorframework.io.bundle.channels.v1": ",".join(release.channels),
        "operators.operatorframework.io.bundle.channel.default.v1": releases.default_channel,
        **listing,
        **scorecard,
    }


def _metrics_port(release: Release) -> int:
    return METRICS_PORT if release.has("secure-metrics") else HEALTH_PORT


def metrics_service(templates: Templates, release: Release) -> dict[str, Any]:
    """The Service in front of the operator's /metrics, which the shipped ServiceMonitor selects."""
    service: dict[str, Any] = templates.yaml("metrics-service.yaml.j2", deployment=DEPLOYMENT, secure=release.has("secure-metrics"),
                                             port=_metrics_port(release))
    return service


def network_policy(templates: Templates, release: Release) -> dict[str, dict[str, Any]]:
    """With network-policy, the NetworkPolicy that lets in only the API server's calls of the webhooks and the
    scrapes of /metrics from where Prometheus runs (docs/install.md)."""
    if not release.has("network-policy"):
        return {}
    return {NETWORK_POLICY_FILE: templates.yaml("network-policy.yaml.j2", deployment=DEPLOYMENT, webhook_port=WEBHOOK_PORT,
                                                metrics_port=_metrics_port(release), monitoring_namespaces=MONITORING_NAMESPACE_LABELS)}


def disruption_budget(templates: Templates, release: Release) -> dict[str, dict[str, Any]]:
    """With self-drain, the budget that keeps one replica of the operator through a drain of its node."""
    if not release.has("self-drain"):
        return {}
    return {DISRUPTION_BUDGET_FILE: templates.yaml("disruption-budget.yaml.j2", deployment=DEPLOYMENT)}


def bundle_manifests(templates: Templates, releases: Releases, images: ImageRefs, release: Release) -> dict[str, dict[str, Any]]:
    """The objects in manifests/, by file name; the catalog describes their CSV."""
    return {
        CSV_FILE: build_csv(templates, releases, images, release),
        **build_crds(release),
        METRICS_SERVICE_FILE: metrics_service(templates, release),
        **disruption_budget(templates, release),
        **network_policy(templates, release),
        **_roles(templates, release),
    }


def render_bundle_tree(templates: Templates, releases: Releases, images: ImageRefs, release: Release) -> Output:
    """``bundle/…`` plus ``bundle.Dockerfile``, relative to a build-context root."""
    annotations = bundle_annotations(releases, release)
    files = [
        RenderedFile.text(f"bundle/manifests/{name}", yamlout.dump(obj))
        for name, obj in bundle_manifests(templates, releases, images, release).items()
    ]
    files.append(RenderedFile.text("bundle/metadata/annotations.yaml", yamlout.dump(
        templates.yaml("annotations.yaml.j2", annotations=annotations)
    )))
    if release.scorecard:
        files.append(RenderedFile.text(f"bundle/{SCORECARD_CONFIG_DIR}config.yaml", yamlout.dump(
            templates.yaml("scorecard-config.yaml.j2", tests=SCORECARD_TESTS, image=f"{SCORECARD_IMAGE}:{release.scorecard}")
        )))
    files.append(RenderedFile.text("bundle.Dockerfile", templates.text(
        "bundle.Dockerfile.j2", package=releases.package, version=release.version, annotations=annotations,
        scorecard_config=SCORECARD_CONFIG_DIR if release.scorecard else None,
    )))
    return Output(tuple(files), owned_dirs=(PurePosixPath("bundle"),))
