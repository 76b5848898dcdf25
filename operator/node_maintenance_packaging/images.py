"""`nmo-pack images`: build the images of one release or of every release, push them, print their digests.

Order matters for pinning: each operator image is pinned into its bundle, and each bundle image into
the catalog; no image names its own digest. Every image is built from the current source; the release
decides the version the wheel, the labels, the tags and the CSV carry.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .errors import PackagingError, release_error
from .files import write
from .imagetool import TOOLS, Builder, pick, registry_host, unanswered
from .operator_image import build_operator_image, image_cache
from .releases import Release
from .render import RELEASES_FILE, Inputs, bundle_output, catalog_output, load_inputs

# Go's names of the machines `uname -m` reports: every builder here makes images of the host's architecture.
_GO_ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x"}


@dataclass(frozen=True)
class Built:
    role: str
    reference: str
    digest: str

    @property
    def pinned(self) -> str:
        return f"{self.reference.rsplit(':', 1)[0]}@{self.digest}"


def build_images(
    root: Path,
    *,
    registry: str,
    opm_image: str,
    release: str | None = None,
    all_releases: bool = False,
    through: str | None = None,
    tool: str = "auto",
    tls_verify: bool = True,
    pin_digests: bool = False,
    base_image: str | None = None,
    cache: Path | None = None,
) -> list[Built]:
    """Build and push operator and bundle images (of ``release``, the newest by default, or of every
    release up to ``through``) and the catalog image of those releases. ``cache``: see
    ``build_operator_image``."""
    builder = Builder(pick(tool), tls_verify=tls_verify)
    assembler = Builder(pick("umoci"), tls_verify=tls_verify)  # the operator image needs no engine
    built: list[Built] = []
    digests: dict[str, str] = {}
    try:
        if reason := unanswered(registry, tls_verify):  # asked once the tools are known to be there, before any build
            raise PackagingError(f"pushing {registry}/: nothing answers at {registry_host(registry)} ({reason}); check --registry, "
                                 "and that the registry is up")
        inputs = load_inputs(root / RELEASES_FILE, registry=registry, through=through)
        wanted = inputs.releases.releases if all_releases else [inputs.releases.get(release) if release else inputs.releases.current]
        check_architectures([*wanted, inputs.releases.current], platform.machine())

        def record(item: Built) -> None:
            built.append(item)
            if pin_digests:
                digests[item.reference] = item.digest

        def pinned() -> Inputs:
            return load_inputs(root / RELEASES_FILE, registry=registry, digests=digests, through=through)

        for version in wanted:
            reference = inputs.images.tagged("operator", version)
            record(Built("operator", reference, build_operator_image(assembler, root, version.version, reference, base_image, cache)))
            record(build_bundle_image(builder, pinned(), version.version))
        record(build_catalog_image(builder, pinned(), opm_image))
        return built
    finally:
        builder.close()
        assembler.close()


def check_architectures(releases: Iterable[Release], machine: str) -> None:
    """Refuse to build images whose CSV would label them with architectures other than the host's (``machine``, as
    `uname -m` says it), the one architecture the builders make: a wrong label offers the operator to nodes it cannot
    run on. The catalog image is built beside the newest release's, so it is judged by that release."""
    host = _GO_ARCHITECTURES.get(machine, machine)
    for release in releases:
        if release.architectures and release.architectures != (host,):
            raise release_error(release.version, "architectures", f"{list(release.architectures)}, but this host builds {host} images only",
                                f"build it on a host of that architecture, or declare [{host}]")


def build_bundle_image(builder: Builder, inputs: Inputs, version: str) -> Built:
    """Render release ``version``'s bundle from ``inputs`` (images pinned as they say), build and push it."""
    stage = Path(tempfile.mkdtemp(dir=builder.workdir, prefix="bundle-"))
    write(bundle_output(inputs, version), stage)
    reference = inputs.images.tagged("bundle", inputs.releases.get(version))
    return Built("bundle", reference, builder.build_and_push(stage, stage / "bundle.Dockerfile", reference))


def build_catalog_image(builder: Builder, inputs: Inputs, opm_image: str) -> Built:
    """Render the catalog of every release in ``inputs``, build it on ``opm_image`` and push it under its tag."""
    stage = Path(tempfile.mkdtemp(dir=builder.workdir, prefix="catalog-"))
    write(catalog_output(inputs), stage)
    reference = inputs.images.tagged("catalog")
    return Built("catalog", reference, builder.build_and_push(stage, stage / "catalog.Dockerfile", reference, {"OPM_IMAGE": opm_image}))


def _run(args: argparse.Namespace) -> int:
    for item in build_images(
        args.root,
        registry=args.registry,
        opm_image=args.opm_image,
        release=args.release,
        all_releases=args.all_releases,
        through=args.through,
        tool=args.tool,
        tls_verify=args.tls_verify,
        pin_digests=args.pin_digests,
        base_image=args.base_image,
        cache=image_cache() if args.cache else None,
    ):
        print(f"{item.role}\t{item.reference}\t{item.digest}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = subparsers.add_parser(
        "images",
        help="build and push the operator, bundle and catalog images; print their digests",
        description=__doc__.splitlines()[0],
    )
    cmd.add_argument("--root", type=Path, default=Path("."), help="repository top (default: .)")
    cmd.add_argument("--registry", required=True, help="registry prefix to push to, e.g. quay.io/myorg")
    cmd.add_argument("--opm-image", required=True, help="opm base image of the catalog image, e.g. quay.io/operator-framework/opm:v1.63.0")
    which = cmd.add_mutually_exclusive_group()
    which.add_argument("--release", metavar="VERSION", help="release to build (default: the newest)")
    which.add_argument("--all-releases", action="store_true", help="build every release's operator and bundle images")
    cmd.add_argument("--through", metavar="VERSION", help="leave out releases newer than VERSION (the catalog as it was then)")
    cmd.add_argument("--base-image", help="Python base of the operator image (default: made here from Debian's packages)")
    cmd.add_argument("--tool", choices=("auto", *TOOLS), default="auto", help="bundle and catalog image tool (default: the first available of %(choices)s)")
    cmd.add_argument("--tls-verify", action=argparse.BooleanOptionalAction, default=True, help="verify registry TLS (off for a local plain-HTTP registry)")
    cmd.add_argument("--pin-digests", action="store_true", help="release build: reference built images by digest in the bundles and the catalog")
    cmd.add_argument("--cache", action="store_true",
                     help="reuse an operator image built before from the same inputs (kept in the image cache; the build is reproducible)")
    cmd.set_defaults(handler=_run)
