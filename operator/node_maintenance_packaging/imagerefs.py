"""Image references for a release: by tag in development, by digest when the image builder pins them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import PackagingError
from .releases import Release, Releases

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class ImageRefs:
    """Names every image of every release; ``digests`` maps a tagged reference to its sha256 digest."""

    releases: Releases
    digests: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        known = self.all_tagged()
        for ref, digest in self.digests.items():
            if ref not in known:
                raise PackagingError(
                    f"digest given for {ref}, which no release references; "
                    f"pin one of the rendered images (check --registry), e.g. {sorted(known)[0]}"
                )
            if not _DIGEST.match(digest):
                raise PackagingError(f"digest for {ref} is {digest!r}; give it as sha256:<64 hex digits>")

    def tagged(self, role: str, release: Release | None = None, *, tag: str | None = None) -> str:
        """The by-tag reference of an image role, e.g. ghcr.io/node-maintenance-operator/node-maintenance-operator:0.3.0."""
        pattern = self.releases.images[role]
        name = pattern.format(version=release.version if release else "", tag=tag or self.releases.catalog_tag)
        return f"{self.releases.registry}/{name}"

    def ref(self, role: str, release: Release | None = None, *, tag: str | None = None) -> str:
        """The reference manifests use: pinned to its digest when one is known, else by tag."""
        tagged = self.tagged(role, release, tag=tag)
        digest = self.digests.get(tagged)
        if digest is None:
            return tagged
        repository = tagged.rsplit(":", 1)[0]
        return f"{repository}@{digest}"

    def all_tagged(self) -> set[str]:
        """Every by-tag reference the rendered files can contain."""
        refs = {self.tagged("catalog")}
        for release in self.releases.releases:
            refs.add(self.tagged("operator", release))
            refs.add(self.tagged("bundle", release))
        return refs
