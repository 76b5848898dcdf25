"""Publish every image to a cluster's local registry, as a release build does, and render what refers to them.

The images are built exactly as ``nmo-pack images --all-releases --pin-digests`` builds them (the
same function), after the upstream images they stand on (opm, OLM's util image) are built from their
pinned modules.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from node_maintenance_packaging.images import Built, build_images
from node_maintenance_packaging.render import RELEASES_FILE, Inputs, load_inputs

from .opm_image import build_opm_image, build_util_image

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

    def inputs(self) -> Inputs:
        """Releases with this registry and every published digest pinned: renders what the images hold."""
        return load_inputs(ROOT / RELEASES_FILE, registry=self.registry, digests={b.reference: b.digest for b in self.built})


def publish(registry_host: str, *, through: str | None = None) -> Published:
    """Build and push the opm and util images, then every release's images (up to ``through``)."""
    started = time.monotonic()
    registry = f"{registry_host}/{REPOSITORY}"
    opm_image = build_opm_image(registry)
    util_image = build_util_image(registry)
    built = build_images(ROOT, registry=registry, opm_image=opm_image, all_releases=True, through=through,
                         tls_verify=False, pin_digests=True)
    return Published(registry, opm_image, util_image, tuple(built), time.monotonic() - started)
