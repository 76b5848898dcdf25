"""Load releases.yaml into typed objects, rejecting malformed fields with the field's name and the fix.

Cross-release rules (upgrade edges, storage versions, channel order) live in ``checks``; this module
only makes sure each field has the right shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import semver
import yaml

from node_maintenance import api

from . import owned_crds, yaml_fields
from .errors import PackagingError, release_error

FEATURES = ("conversion", "validation", "remediation", "health", "authorization", "secure-metrics", "hook-namespaces", "listing",
            "self-drain", "network-policy")
MATURITIES = ("alpha", "beta", "stable")
# The Linux architectures OpenShift and OperatorHub offer operators for, by Go's names, as the CSV's
# operatorframework.io/arch.* labels name them.
ARCHITECTURES = ("amd64", "arm64", "ppc64le", "s390x")
_OPERATOR_SDK_VERSION = re.compile(r"^v\d+\.\d+\.\d+$")
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


@dataclass(frozen=True)
class Release:
    """One released operator version and what its bundle declares."""

    version: str
    created_at: str
    maturity: str
    channels: tuple[str, ...]
    served: tuple[str, ...]
    storage: str
    features: frozenset[str]
    replaces: str | None
    skips: tuple[str, ...]
    skip_range: str | None
    related_images: tuple[str, ...]
    # CRDs the release owns besides the NodeMaintenance's, by kind.
    owns: tuple[owned_crds.OwnedCrd, ...] = ()
    # The architectures its images are built for (all linux); the CSV's platform labels with the listing feature.
    architectures: tuple[str, ...] = ()
    # The operator-sdk release whose scorecard-test image the bundle's scorecard configuration names; None ships none.
    scorecard: str | None = None

    @property
    def semver(self) -> semver.Version:
        return semver.Version.parse(self.version)

    @property
    def crds(self) -> tuple[owned_crds.OwnedCrd, ...]:
        """Every CRD the release owns, the NodeMaintenance's first."""
        return (owned_crds.OwnedCrd(api.NODE_MAINTENANCE, self.served, self.storage), *self.owns)

    def owns_kind(self, kind: str) -> bool:
        return any(crd.resource.kind == kind for crd in self.crds)

    def has(self, feature: str) -> bool:
        return feature in self.features


@dataclass(frozen=True)
class Releases:
    """The whole releases.yaml: package-wide settings and every release, oldest first."""

    package: str
    registry: str
    images: dict[str, str]
    catalog_tag: str
    min_kube_version: str
    channels: tuple[str, ...]
    default_channel: str
    releases: tuple[Release, ...]
    # Channels whose entries keep only `replaces`: subscribers upgrade through every release in turn.
    stepwise_channels: tuple[str, ...] = ()

    @property
    def current(self) -> Release:
        """The newest release: its bundle is the one in bundle/."""
        return max(self.releases, key=lambda r: r.semver)

    def get(self, version: str) -> Release:
        for release in self.releases:
            if release.version == version:
                return release
        known = ", ".join(r.version for r in self.releases)
        raise PackagingError(f"no release {version} in releases.yaml (known: {known}); pick one of those")

    def csv_name(self, version: str) -> str:
        return f"{self.package}.v{version}"

    def with_registry(self, registry: str) -> Releases:
        return replace(self, registry=registry.rstrip("/"))

    def through(self, version: str) -> Releases:
        """The releases as they stood when ``version`` was the newest (to rebuild an older catalog)."""
        last = self.get(version).semver
        return replace(self, releases=tuple(r for r in self.releases if r.semver <= last))


def load(path: Path) -> Releases:
    """Parse releases.yaml; every shape error names the field and how to fix it."""
    if not path.is_file():
        raise PackagingError(f"{path} not found: run from the repository top or pass --root")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise PackagingError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise PackagingError(f"{path}: expected a mapping at the top level")
    return _parse(doc)


def _parse(doc: dict[str, Any]) -> Releases:
    images = yaml_fields.field(doc, "images", dict)
    for role in ("operator", "bundle", "catalog"):
        if not isinstance(images.get(role), str):
            raise PackagingError(f"releases.yaml: images.{role}: missing; give the repository and tag, e.g. name:{{version}}")
    channels = tuple(yaml_fields.string_list(doc, "channels", where="releases.yaml"))
    if not channels:
        raise PackagingError("releases.yaml: channels: empty; list at least one channel, e.g. [stable, candidate]")
    default_channel = yaml_fields.field(doc, "defaultChannel", str)
    if default_channel not in channels:
        raise PackagingError(
            f"releases.yaml: defaultChannel: {default_channel!r} is not in channels {list(channels)}; add it there or pick one of those"
        )
    stepwise = tuple(yaml_fields.string_list(doc, "stepwiseChannels", where="releases.yaml")) if "stepwiseChannels" in doc else ()
    for channel in stepwise:
        if channel not in channels:
            raise PackagingError(
                f"releases.yaml: stepwiseChannels: {channel!r} is not in channels {list(channels)}; add it there or remove it"
            )
    min_kube = str(yaml_fields.field(doc, "minKubeVersion", str))
    if not semver.Version.is_valid(min_kube):
        raise PackagingError(f"releases.yaml: minKubeVersion: {min_kube!r} is not semver; write it like 1.30.0")
    raw_releases = yaml_fields.field(doc, "releases", list)
    if not raw_releases:
        raise PackagingError("releases.yaml: releases: empty; declare at least one release")
    releases = tuple(_parse_release(raw, channels, images) for raw in raw_releases)
    seen: set[str] = set()
    for release in releases:
        if release.version in seen:
            raise release_error(release.version, "version", "declared twice", "keep one entry per version")
        seen.add(release.version)
    return Releases(
        package=yaml_fields.field(doc, "package", str),
        registry=yaml_fields.field(doc, "registry", str).rstrip("/"),
        images=dict(images),
        catalog_tag=_catalog_tag(str(yaml_fields.field(doc, "catalogTag", str)), max(releases, key=lambda r: r.semver)),
        min_kube_version=min_kube,
        channels=channels,
        default_channel=default_channel,
        releases=releases,
        stepwise_channels=stepwise,
    )


def _catalog_tag(pattern: str, current: Release) -> str:
    """The catalog tag ``pattern`` names for the newest release (``{major}``: its major version); never a moving tag
    that could carry a Subscription across major versions."""
    try:
        tag = pattern.format(major=current.semver.major)
    except (KeyError, IndexError, ValueError) as error:
        raise PackagingError(f"releases.yaml: catalogTag: {pattern!r} cannot be formatted ({error}); "
                             "write a versioned tag, e.g. v{major}") from None
    if tag == "latest" or not re.fullmatch(r"[\w][\w.-]{0,127}", tag):
        raise PackagingError(f"releases.yaml: catalogTag: {pattern!r} gives {tag!r}; write a versioned image tag, e.g. v{{major}}")
    return tag


def _parse_release(raw: Any, channels: tuple[str, ...], images: dict[str, str]) -> Release:
    if not isinstance(raw, dict) or "version" not in raw:
        raise PackagingError(f"releases.yaml: releases: entry {raw!r} has no version; start each entry with `version: X.Y.Z`")
    version = str(raw["version"])
    if not semver.Version.is_valid(version):
        raise release_error(version, "version", "not semver", "write it as MAJOR.MINOR.PATCH, e.g. 0.4.0")
    where = f"release {version}"

    created_at = str(yaml_fields.field(raw, "createdAt", str, where))
    if not _RFC3339.match(created_at):
        raise release_error(version, "createdAt", f"{created_at!r} is not an RFC 3339 UTC time", 'write it like "2025-02-10T00:00:00Z"')
    maturity = yaml_fields.field(raw, "maturity", str, where)
    if maturity not in MATURITIES:
        raise release_error(version, "maturity", f"{maturity!r} is unknown", f"use one of {', '.join(MATURITIES)}")

    release_channels = tuple(yaml_fields.string_list(raw, "channels", where))
    for channel in release_channels:
        if channel not in channels:
            raise release_error(version, "channels", f"{channel!r} is not a declared channel", f"add it to the top-level channels {list(channels)}")
    if not release_channels:
        raise release_error(version, "channels", "empty", "publish the release in at least one channel")

    served = owned_crds.served_versions(raw, version, api.NODE_MAINTENANCE, "served")
    storage = owned_crds.storage_version(raw, version, served)

    features = frozenset(yaml_fields.string_list(raw, "features", where))
    unknown = sorted(features - set(FEATURES))
    if unknown:
        raise release_error(version, "features", f"{unknown[0]!r} is unknown", f"use any of {', '.join(FEATURES)}")

    replaces = raw.get("replaces")
    skip_range = raw.get("skipRange")
    if skip_range is not None and not isinstance(skip_range, str):
        raise release_error(version, "skipRange", "must be a string", 'quote it, e.g. ">=0.1.0 <0.3.0"')

    architectures = tuple(yaml_fields.string_list(raw, "architectures", where))
    for architecture in architectures:
        if architecture not in ARCHITECTURES:
            raise release_error(version, "architectures", f"{architecture!r} is not a platform OperatorHub lists",
                                f"use Go's names, any of {', '.join(ARCHITECTURES)}")
    if "listing" in features and not architectures:
        raise release_error(version, "architectures", "missing, and the listing feature labels the CSV with them",
                            "list those its images are built for, e.g. architectures: [amd64]")
    scorecard = raw.get("scorecard")
    if scorecard is not None and not (isinstance(scorecard, str) and _OPERATOR_SDK_VERSION.match(scorecard)):
        raise release_error(version, "scorecard", f"{scorecard!r} is not an operator-sdk release",
                            "name the one whose scorecard-test image runs the suites, e.g. v1.42.2")

    related = tuple(yaml_fields.string_list(raw, "relatedImages", where))
    for role in related:
        if role not in images:
            raise release_error(version, "relatedImages", f"{role!r} is not an image role", f"use keys of images: {', '.join(images)}")

    return Release(
        version=version,
        created_at=created_at,
        maturity=maturity,
        channels=release_channels,
        served=served,
        storage=storage,
        features=features,
        replaces=None if replaces is None else str(replaces),
        skips=tuple(str(s) for s in raw.get("skips") or ()),
        skip_range=skip_range,
        related_images=related,
        owns=owned_crds.parse(raw, version),
        architectures=architectures,
        scorecard=scorecard,
    )
