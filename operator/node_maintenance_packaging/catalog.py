"""The file-based catalog: the package, its channels and one olm.bundle per release, as opm renders them.

Each olm.bundle describes its CSV with one olm.csv.metadata property, what ``opm render
--migrate-level bundle-object-to-csv-metadata`` writes: the form Red Hat's catalogs for OpenShift 4.17 and
later require, which refuse the manifests embedded whole (olm.bundle.object). Nothing is lost by it: OLM
installs a bundle that names its image by unpacking that image, and the catalog's own opm serves the CSV
the package server shows (OperatorHub's view) built from olm.csv.metadata and the package's icon, whatever
the cluster's OLM.
"""

from __future__ import annotations

import base64
from pathlib import PurePosixPath
from typing import Any

from node_maintenance import api

from . import assets, yamlout
from .bundle import bundle_manifests
from .files import Output, RenderedFile
from .imagerefs import ImageRefs
from .releases import Release, Releases
from .templating import Templates

# The catalog image stands on an opm image of this project's own build (opm and grpc_health_probe from
# their pinned modules, as hack/tools/opm pins them), published next to our other images; the
# Dockerfile's OPM_IMAGE argument names another.
OPM_REPOSITORY = "opm"
OPM_VERSION = "v1.63.0"


def opm_image(releases: Releases) -> str:
    return f"{releases.registry}/{OPM_REPOSITORY}:{OPM_VERSION}"


def render_catalog(templates: Templates, releases: Releases, images: ImageRefs) -> Output:
    """``catalog/<package>/…`` plus ``catalog.Dockerfile``."""
    base = f"catalog/{releases.package}"
    manifests = {r.version: bundle_manifests(templates, releases, images, r) for r in releases.releases}
    current_csv = _csv(manifests[releases.current.version])
    index = [_package(releases, current_csv), *(_channel(releases, c) for c in releases.channels)]
    files = [RenderedFile.text(f"{base}/index.yaml", yamlout.dump_all(index))]
    for release in releases.releases:
        bundle = _bundle(releases, images, release, manifests[release.version])
        files.append(RenderedFile.text(f"{base}/bundles/{bundle['name']}.yaml", yamlout.dump(bundle)))
    files.append(RenderedFile.text("catalog.Dockerfile", templates.text(
        "catalog.Dockerfile.j2", package=releases.package, opm_image=opm_image(releases)
    )))
    return Output(tuple(files), owned_dirs=(PurePosixPath("catalog"),))


def _csv(manifests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return next(obj for obj in manifests.values() if obj["kind"] == "ClusterServiceVersion")


def _package(releases: Releases, current_csv: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": "olm.package",
        "name": releases.package,
        "defaultChannel": releases.default_channel,
        "description": current_csv["spec"]["description"],
        "icon": {"base64data": base64.b64encode(assets.icon_svg()).decode("ascii"), "mediatype": assets.ICON_MEDIATYPE},
    }


def _channel(releases: Releases, channel: str) -> dict[str, Any]:
    entries = []
    for release in releases.releases:
        if channel not in release.channels:
            continue
        entry: dict[str, Any] = {"name": releases.csv_name(release.version)}
        if release.replaces:
            entry["replaces"] = releases.csv_name(release.replaces)
        # In a stepwise channel skips are left out: OLM would take one straight to the newest release.
        if channel not in releases.stepwise_channels:
            if release.skips:
                entry["skips"] = [releases.csv_name(v) for v in release.skips]
            if release.skip_range:
                entry["skipRange"] = release.skip_range
        entries.append(entry)
    return {"schema": "olm.channel", "package": releases.package, "name": channel, "entries": entries}


def _bundle(releases: Releases, images: ImageRefs, release: Release, manifests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    csv = _csv(manifests)
    properties: list[dict[str, Any]] = [
        {"type": "olm.gvk", "value": {"group": api.GROUP, "kind": owned.resource.kind, "version": version}}
        for owned in release.crds
        for version in sorted(owned.served)
    ]
    properties.append({"type": "olm.package", "value": {"packageName": releases.package, "version": release.version}})
    properties.append({"type": "olm.csv.metadata", "value": _csv_metadata(csv)})
    bundle_image = images.ref("bundle", release)
    related = [{"name": "", "image": bundle_image}, *csv["spec"]["relatedImages"]]
    return {
        "schema": "olm.bundle",
        "name": releases.csv_name(release.version),
        "package": releases.package,
        "image": bundle_image,
        "properties": properties,
        "relatedImages": related,
    }


def _csv_metadata(csv: dict[str, Any]) -> dict[str, Any]:
    """The CSV fields OperatorHub shows, as opm's olm.csv.metadata property carries them (labels only when
    the CSV has some, as opm leaves an empty map out)."""
    spec = csv["spec"]
    labels = csv["metadata"].get("labels")
    return {
        "annotations": csv["metadata"]["annotations"],
        "apiServiceDefinitions": {},
        "crdDescriptions": spec["customresourcedefinitions"],
        "description": spec["description"],
        "displayName": spec["displayName"],
        "installModes": spec["installModes"],
        "keywords": spec["keywords"],
        **({"labels": labels} if labels else {}),
        "links": spec["links"],
        "maintainers": spec["maintainers"],
        "maturity": spec["maturity"],
        "minKubeVersion": spec["minKubeVersion"],
        "provider": spec["provider"],
    }

