"""Publish every image to a cluster's local registry, as a release build does, and render what refers to them.

The images are built exactly as ``nmo-pack images --all-releases --pin-digests`` builds them (the
same function), after the upstream images they stand on (opm, OLM's util image) are built from their
pinned modules. Operator images are kept in the image cache keyed by their inputs, so an unchanged
source is pushed again, not rebuilt.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from node_maintenance_packaging.imagerefs import ImageRefs
from node_maintenance_packaging.images import Built, build_bundle_image, build_catalog_image, build_images
from node_maintenance_packaging.imagetool import Builder, pick
from node_maintenance_packaging.operator_image import BUILD_BASE_PACKAGES, base_layout, build_operator_image, image_cache, operator_layout
from node_maintenance_packaging.releases import Releases
from node_maintenance_packaging.render import RELEASES_FILE, Inputs, load_inputs
from node_maintenance_packaging.templating import DEFAULT_TEMPLATES, Templates

from .upstream_images import build_opm_image, build_util_image

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "nmo"  # the registry path our images go under, as a release's registry would name an organisation


@dataclass(frozen=True)
class Published:
    registry: str  # host:port/path, what --registry was
    opm_image: str
    util_image: str
    built: tuple[Built, ...]
    seconds: float

    def digest(self, role: str, version: str | None = None) -> str:
        """The digest of an image role (of one release, for operator and bundle images)."""
        for item in self.built:
            tag = item.reference.rsplit(":", 1)[1]
            if item.role == role and (version is None or tag.endswith(version)):
                return item.digest
        raise KeyError(f"no {role} image {version or ''} was published")

    def inputs(self, through: str | None = None) -> Inputs:
        """Releases (up to ``through``) with this registry and every published digest pinned: renders what
        the images hold."""
        return pinned(load_inputs(ROOT / RELEASES_FILE, registry=self.registry, through=through).releases, self.pins)

    @property
    def pins(self) -> dict[str, str]:
        """Every published image's tagged reference and its digest."""
        return {b.reference: b.digest for b in self.built}

    def push_catalog(self, inputs: Inputs) -> str:
        """Build the catalog of ``inputs`` and push it under the catalog's tag, as a release updates its
        catalog in place; returns its digest."""
        with _builder() as builder:
            return build_catalog_image(builder, inputs, self.opm_image).digest

    def push_bundle(self, inputs: Inputs, version: str) -> str:
        """Build and push release ``version``'s bundle as ``inputs`` render it; returns its digest."""
        with _builder() as builder:
            return build_bundle_image(builder, inputs, version).digest

    def restore_catalog(self) -> None:
        """Point the catalog's tag at the catalog image first published (every release)."""
        reference = next(b.reference for b in self.built if b.role == "catalog")
        repository = reference.rsplit(":", 1)[0]
        subprocess.run(["skopeo", "copy", "--src-tls-verify=false", "--dest-tls-verify=false",
                        f"docker://{repository}@{self.digest('catalog')}", f"docker://{reference}"], check=True, capture_output=True)


def pinned(releases: Releases, digests: dict[str, str]) -> Inputs:
    """Render inputs for ``releases`` (which may differ from releases.yaml) with images pinned to ``digests``."""
    known = ImageRefs(releases).all_tagged()
    return Inputs(releases, ImageRefs(releases, {ref: d for ref, d in digests.items() if ref in known}), Templates(DEFAULT_TEMPLATES))


@contextlib.contextmanager
def _builder() -> Iterator[Builder]:
    builder = Builder(pick("auto"), tls_verify=False)
    try:
        yield builder
    finally:
        builder.close()


def publish(registry_host: str, *, through: str | None = None) -> Published:
    """Build and push the opm and util images, then every release's images (up to ``through``)."""
    started = time.monotonic()
    registry = f"{registry_host}/{REPOSITORY}"
    opm_image = build_opm_image(registry)
    util_image = build_util_image(registry)
    built = build_images(ROOT, registry=registry, opm_image=opm_image, all_releases=True, through=through,
                         tls_verify=False, pin_digests=True, cache=image_cache())
    return Published(registry, opm_image, util_image, tuple(built), time.monotonic() - started)


def publish_operator(registry_host: str) -> Published:
    """Only the newest release's operator image, for a test that installs that release from its rendered bundle
    without OLM: neither opm, OLM's util image, nor any bundle or catalog is built."""
    started = time.monotonic()
    registry = f"{registry_host}/{REPOSITORY}"
    inputs = load_inputs(ROOT / RELEASES_FILE, registry=registry)
    release = inputs.releases.current
    reference = inputs.images.tagged("operator", release)
    with contextlib.closing(Builder(pick("umoci"), tls_verify=False)) as assembler:
        digest = build_operator_image(assembler, ROOT, release.version, reference, cache=image_cache())
    return Published(registry, "", "", (Built("operator", reference, digest),), time.monotonic() - started)


def warm_image_cache() -> list[str]:
    """Build into the image cache, before any test starts, what the tests' images stand on: the Python bases (the
    image's, and the build stage's that a container engine builds from) and every release's operator image. A
    test then pushes them: on a fresh machine no test's time limit pays for a cold build. Returns what is kept."""
    kept = [base_layout(), base_layout(packages=BUILD_BASE_PACKAGES)]
    inputs = load_inputs(ROOT / RELEASES_FILE)
    with contextlib.closing(Builder(pick("umoci"), tls_verify=False)) as assembler:
        for release in inputs.releases.releases:
            reference = inputs.images.tagged("operator", release)
            kept.append(str(operator_layout(assembler, ROOT, release.version, reference, cache=image_cache())))
    return kept
