"""`nmo-pack images`: build a release's images, push them to a registry and print their digests.

Order matters for pinning: the operator image (where an engine can build it) is pinned into the
bundle, and the bundle image is pinned into the catalog; neither image names its own digest.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import PackagingError
from .files import write
from .imagetool import TOOLS, Builder, pick
from .render import RELEASES_FILE, bundle_output, catalog_output, load_inputs


@dataclass(frozen=True)
class Built:
    role: str
    reference: str
    digest: str

    @property
    def pinned(self) -> str:
        return f"{self.reference.rsplit(':', 1)[0]}@{self.digest}"


def build_release_images(
    root: Path,
    *,
    registry: str,
    opm_image: str,
    release: str | None = None,
    tool: str = "auto",
    tls_verify: bool = True,
    pin_digests: bool = False,
    operator_image: bool = False,
) -> list[Built]:
    """Build and push the bundle and catalog images (and the operator image when asked) of one release."""
    builder = Builder(pick(tool), tls_verify=tls_verify)
    built: list[Built] = []
    try:
        inputs = load_inputs(root / RELEASES_FILE, registry=registry)
        version = inputs.releases.get(release) if release else inputs.releases.current
        digests: dict[str, str] = {}

        def push(role: str, context: Path, dockerfile: Path, reference: str, args: dict[str, str] | None = None) -> None:
            digest = builder.build_and_push(context, dockerfile, reference, args)
            built.append(Built(role, reference, digest))
            if pin_digests:
                digests[reference] = digest

        if operator_image:
            if builder.tool == "umoci":
                raise PackagingError("--operator-image needs a container engine (buildah, podman or docker) to run the Python build stage")
            push("operator", root, root / "Dockerfile", inputs.images.tagged("operator", version))
        stage = Path(tempfile.mkdtemp(dir=builder.workdir, prefix="context-"))
        pinned = load_inputs(root / RELEASES_FILE, registry=registry, digests=digests)
        write(bundle_output(pinned, version.version), stage)
        push("bundle", stage, stage / "bundle.Dockerfile", inputs.images.tagged("bundle", version))
        pinned = load_inputs(root / RELEASES_FILE, registry=registry, digests=digests)
        write(catalog_output(pinned), stage)
        push("catalog", stage, stage / "catalog.Dockerfile", inputs.images.tagged("catalog"), {"OPM_IMAGE": opm_image})
        return built
    finally:
        builder.close()


def _run(args: argparse.Namespace) -> int:
    for item in build_release_images(
        args.root,
        registry=args.registry,
        opm_image=args.opm_image,
        release=args.release,
        tool=args.tool,
        tls_verify=args.tls_verify,
        pin_digests=args.pin_digests,
        operator_image=args.operator_image,
    ):
        print(f"{item.role}\t{item.reference}\t{item.digest}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    cmd = subparsers.add_parser(
        "images",
        help="build and push a release's bundle and catalog images; print their digests",
        description=__doc__.splitlines()[0],
    )
    cmd.add_argument("--root", type=Path, default=Path("."), help="repository top (default: .)")
    cmd.add_argument("--registry", required=True, help="registry prefix to push to, e.g. quay.io/myorg")
    cmd.add_argument("--opm-image", required=True, help="opm base image of the catalog image, e.g. quay.io/operator-framework/opm:v1.63.0")
    cmd.add_argument("--release", metavar="VERSION", help="release to build (default: the newest)")
    cmd.add_argument("--tool", choices=("auto", *TOOLS), default="auto", help="image tool (default: the first available of %(choices)s)")
    cmd.add_argument("--tls-verify", action=argparse.BooleanOptionalAction, default=True, help="verify registry TLS (off for a local plain-HTTP registry)")
    cmd.add_argument("--pin-digests", action="store_true", help="release build: reference built images by digest in the bundle and catalog")
    cmd.add_argument("--operator-image", action="store_true", help="also build the operator image from Dockerfile (needs a container engine)")
    cmd.set_defaults(handler=_run)
