"""Manifests that install the operator through OLM from the catalog image, for Kubernetes and OpenShift."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from . import yamlout
from .clusterserviceversion import NAMESPACE
from .files import Output, RenderedFile
from .releases import Releases
from .templating import Templates

# Where each platform's OLM looks for cluster-wide CatalogSources.
CATALOG_NAMESPACES = {"kubernetes": "olm", "openshift": "openshift-marketplace"}
MANIFESTS = ("nm-ns.yaml", "nm-op-group.yaml", "nm-catalog-source.yaml", "nm-sub.yaml")
APPROVALS = ("Automatic", "Manual")


@dataclass(frozen=True)
class DeployParameters:
    """What the deploy manifests install: the catalog image, the starting version and how upgrades are approved."""

    catalog_image: str
    version: str
    approval: str = "Automatic"


def render_deploy(templates: Templates, releases: Releases, params: DeployParameters) -> Output:
    """``olm-deploy-manifests/<platform>/nm-*.yaml``."""
    release = releases.get(params.version)
    context = {
        "package": releases.package,
        "namespace": NAMESPACE,
        "catalog_source": f"{releases.package}-catalog",
        "catalog_image": params.catalog_image,
        "channel": releases.default_channel if releases.default_channel in release.channels else release.channels[0],
        "starting_csv": releases.csv_name(release.version),
        "approval": params.approval,
    }
    files = [
        RenderedFile.text(
            f"olm-deploy-manifests/{platform}/{name}",
            yamlout.dump(templates.yaml(f"deploy/{name}.j2", catalog_namespace=catalog_namespace, **context)),
        )
        for platform, catalog_namespace in CATALOG_NAMESPACES.items()
        for name in MANIFESTS
    ]
    return Output(tuple(files), owned_dirs=(PurePosixPath("olm-deploy-manifests"),))
