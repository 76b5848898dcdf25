"""Safety checks across releases: upgrade graphs OLM would refuse or resolve wrongly, and unsafe CRDs.

Each failed check is a PackagingError naming the release, the releases.yaml field and the fix. All
problems are collected first, so one run reports everything that needs fixing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import semver

from node_maintenance import api

from . import semrange
from .errors import PackagingError, release_error
from .releases import Release, Releases


def check_releases(releases: Releases, declared: Releases | None = None) -> None:
    """Raise one PackagingError listing every problem of the releases; ``declared``: all that releases.yaml
    declares, when ``releases`` stops at an older one (the schemas' ``since`` may name a newer one)."""
    problems = [
        *_listing_order(releases),
        *_edge_targets(releases),
        *_channel_graphs(releases),
        *_dropped_stored_versions(releases),
        *_unconvertible_versions(releases),
        *_unknown_since(declared or releases),
    ]
    if problems:
        raise PackagingError("\n".join(str(p) for p in problems))


def check_related_images(release: Release, csv: dict[str, Any]) -> None:
    """Every image the CSV runs must be in relatedImages, or disconnected mirroring misses it."""
    related = {entry["image"] for entry in csv["spec"].get("relatedImages", [])}
    used = set(_csv_images(csv))
    missing = sorted(used - related)
    if missing:
        raise release_error(
            release.version,
            "relatedImages",
            f"the CSV uses {', '.join(missing)} but its relatedImages does not list it, so mirroring for "
            "disconnected clusters would leave it behind",
            "add the image's role (a key of images) to the release's relatedImages in releases.yaml",
        )


def _csv_images(csv: dict[str, Any]) -> Iterator[str]:
    container_image = csv["metadata"].get("annotations", {}).get("containerImage")
    if container_image:
        yield container_image
    for deployment in csv["spec"]["install"]["spec"]["deployments"]:
        pod = deployment["spec"]["template"]["spec"]
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            yield container["image"]


def _listing_order(releases: Releases) -> Iterator[PackagingError]:
    for older, newer in itertools.pairwise(releases.releases):
        if newer.semver <= older.semver:
            yield release_error(
                newer.version, "version", f"listed after {older.version} but not newer",
                "list releases oldest first, in semver order",
            )


def _edges(releases: Releases, release: Release) -> Iterator[tuple[str, Release]]:
    """(field, predecessor) for every release that upgrades directly to ``release``."""
    by_version = {r.version: r for r in releases.releases}
    if release.replaces in by_version:
        yield "replaces", by_version[release.replaces]
    for skipped in release.skips:
        if skipped in by_version:
            yield "skips", by_version[skipped]
    if release.skip_range:
        for other in releases.releases:
            if other is not release and _in_range(other, release.skip_range):
                yield "skipRange", other


def _in_range(release: Release, expression: str) -> bool:
    """Range membership; a malformed range matches nothing here and is reported by _edge_targets."""
    try:
        return semrange.matches(release.semver, expression)
    except ValueError:
        return False


def _edge_targets(releases: Releases) -> Iterator[PackagingError]:
    known = {r.version for r in releases.releases}
    for release in releases.releases:
        for field, target in [("replaces", release.replaces), *(("skips", s) for s in release.skips)]:
            if target is not None and target not in known:
                yield release_error(release.version, field, f"{target} is not a declared release", "declare it or remove the edge")
        if release.skip_range:
            try:
                semrange.matches(release.semver, release.skip_range)
            except ValueError:
                yield release_error(release.version, "skipRange", f"{release.skip_range!r} is not a semver range", 'write it like ">=0.1.0 <0.3.0"')


def _channel_graphs(releases: Releases) -> Iterator[PackagingError]:
    """Per channel: edges point from older releases to newer ones in the same channel, with one head, the newest."""
    for channel in releases.channels:
        members = [r for r in releases.releases if channel in r.channels]
        if not members:
            yield PackagingError(f"channel {channel}: no release is published in it; publish one or remove the channel")
            continue
        in_channel = {r.version for r in members}
        superseded: set[str] = set()
        for release in members:
            for field, target in [("replaces", release.replaces), *(("skips", s) for s in release.skips)]:
                if target is None:
                    continue
                if target not in in_channel:
                    yield release_error(
                        release.version, field, f"{target} is not in channel {channel}",
                        f"publish {target} in {channel} too or remove {release.version} from it",
                    )
                    continue
                superseded.add(target)
                if semver.Version.parse(target) >= release.semver:
                    yield release_error(
                        release.version, field, f"{target} is not older, so channel {channel} is out of semver order",
                        "upgrade edges must point from an older release to a newer one",
                    )
        heads = sorted((r for r in members if r.version not in superseded), key=lambda r: r.semver)
        newest = max(members, key=lambda r: r.semver)
        if len(heads) != 1:
            yield PackagingError(
                f"channel {channel}: {len(heads)} heads ({', '.join(r.version for r in heads)}); "
                "a channel needs exactly one: make each older release replaced or skipped by a newer one"
            )
        elif heads[0] is not newest:
            yield release_error(
                heads[0].version, "replaces", f"it heads channel {channel} although {newest.version} is newer (out of semver order)",
                f"make {newest.version} replace the chain's newest release",
            )


def _dropped_stored_versions(releases: Releases) -> Iterator[PackagingError]:
    for release in releases.releases:
        served = {owned.resource.kind: owned.served for owned in release.crds}
        for field, previous in _edges(releases, release):
            for before in previous.crds:
                kind = before.resource.kind
                nm = before.resource is api.NODE_MAINTENANCE
                where, label = ("served", "") if nm else (f"owns.{kind}", f"{kind} ")
                if kind not in served:
                    yield release_error(
                        release.version, where,
                        f"no longer owns the {kind} CRD, which {previous.version} owns, although it upgrades from "
                        f"{previous.version} ({field}); OLM would leave the CRD without an owner",
                        f"keep owning {kind} in {release.version} or remove the upgrade edge from {previous.version}",
                    )
                elif before.storage not in served[kind]:
                    yield release_error(
                        release.version, where,
                        f"drops {label}{before.storage}, which {previous.version} stores, although it upgrades from {previous.version} "
                        f"({field}); clusters upgrading keep {before.storage} in the CRD's status.storedVersions and OLM "
                        "refuses a CRD update that removes a stored version",
                        f"keep serving {before.storage} in {release.version} or remove the upgrade edge from {previous.version}",
                    )


def _unconvertible_versions(releases: Releases) -> Iterator[PackagingError]:
    for release in releases.releases:
        if release.has("conversion") or len(release.served) < 2:
            continue
        first = release.served[0]
        for other in release.served[1:]:
            path = _first_difference(_structure(api.openapi_schema(first)), _structure(api.openapi_schema(other)))
            if path is not None:
                yield release_error(
                    release.version, "features",
                    f"serves {first} and {other}, whose schemas differ at {path}, with the None conversion strategy, "
                    "which only rewrites apiVersion and so cannot convert between them",
                    "add `conversion` to the release's features, or serve versions with identical schemas",
                )


def _unknown_since(releases: Releases) -> Iterator[PackagingError]:
    """A ``since`` hint must name a declared release: renders compare releases with it, so a typo or a release
    not declared yet would silently leave the field out of (or put it into) the wrong bundles."""
    known = [r.version for r in releases.releases]
    for resource in api.RESOURCES:
        for version in resource.versions:
            for where, since in resource.since_hints(version):
                if since not in known:
                    yield PackagingError(
                        f"{resource.kind} {version} ({resource.schema_file(version)}): {where}: since: {since} is not a "
                        f"release in releases.yaml; name the release that first ships it (one of {', '.join(known)}), "
                        f"or declare {since} in releases.yaml first"
                    )


def _structure(schema: Any) -> Any:
    """The schema without prose, so only differences that change what objects look like count."""
    if isinstance(schema, dict):
        return {k: _structure(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [_structure(v) for v in schema]
    return schema


def _first_difference(a: Any, b: Any, path: str = "openAPIV3Schema") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}"
            found = _first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    return None if a == b else path
