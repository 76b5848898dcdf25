"""What each nmo-pack command renders, and the functions other tooling (the image builder) calls.

Everything is rendered in memory first; writing or checking against files happens in ``files``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from . import checks, releases, yamlout
from .apidocs import render_docs
from .bundle import render_bundle_tree
from .catalog import render_catalog
from .chart import render_chart
from .crd import build_crds
from .deploy import DeployParameters, render_deploy
from .files import Output, RenderedFile, write
from .imagerefs import ImageRefs
from .monitoring import render_monitoring
from .releases import Releases
from .templating import DEFAULT_TEMPLATES, Templates

RELEASES_FILE = "releases.yaml"


@dataclass(frozen=True)
class Inputs:
    """Everything a render reads: the checked releases, how images are named, and the templates."""

    releases: Releases
    images: ImageRefs
    templates: Templates

    def default_deploy(self) -> DeployParameters:
        return DeployParameters(catalog_image=self.images.ref("catalog"), version=self.releases.current.version)


def load_inputs(
    releases_file: Path,
    *,
    registry: str | None = None,
    digests: Mapping[str, str] | None = None,
    templates_dir: Path | None = None,
    through: str | None = None,
) -> Inputs:
    """Load and check releases.yaml (up to release ``through`` when given); raises PackagingError when
    anything is unsafe or malformed."""
    declared = releases.load(releases_file)
    checked = declared.through(through) if through else declared
    if registry:
        checked = checked.with_registry(registry)
    checks.check_releases(checked, declared)
    return Inputs(checked, ImageRefs(checked, dict(digests or {})), Templates(templates_dir or DEFAULT_TEMPLATES))


def crd_output(inputs: Inputs) -> Output:
    """The current release's CRDs, the ones end-to-end tests install."""
    crds = build_crds(inputs.releases.current)
    return Output(tuple(RenderedFile(PurePosixPath("bundle/manifests") / name, yamlout.dump(crd).encode()) for name, crd in crds.items()))


def bundle_output(inputs: Inputs, version: str | None = None) -> Output:
    release = inputs.releases.get(version) if version else inputs.releases.current
    return render_bundle_tree(inputs.templates, inputs.releases, inputs.images, release)


def catalog_output(inputs: Inputs) -> Output:
    return render_catalog(inputs.templates, inputs.releases, inputs.images)


def deploy_output(inputs: Inputs, params: DeployParameters | None = None) -> Output:
    return render_deploy(inputs.templates, inputs.releases, params or inputs.default_deploy())


def docs_output(inputs: Inputs) -> Output:
    return render_docs(inputs.templates, inputs.releases)


def monitoring_output(inputs: Inputs) -> Output:
    return render_monitoring(inputs.templates, inputs.releases)


def chart_output(inputs: Inputs) -> Output:
    return render_chart(inputs.templates, inputs.releases, inputs.images)


def all_output(inputs: Inputs, deploy: DeployParameters | None = None) -> Output:
    """The current bundle (its CRD included), the catalog, the deploy manifests, the API reference, the monitoring
    files and the Helm chart."""
    return (bundle_output(inputs) + catalog_output(inputs) + deploy_output(inputs, deploy) + docs_output(inputs)
            + monitoring_output(inputs) + chart_output(inputs))


def render_all(
    out_root: Path,
    *,
    releases_file: Path | None = None,
    registry: str | None = None,
    digests: Mapping[str, str] | None = None,
) -> list[Path]:
    """Render every generated file under ``out_root``; ``digests`` maps tagged image references to sha256 digests."""
    inputs = load_inputs(releases_file or out_root / RELEASES_FILE, registry=registry, digests=digests)
    return write(all_output(inputs), out_root)


def render_bundle(
    version: str,
    out_root: Path,
    *,
    releases_file: Path,
    registry: str | None = None,
    digests: Mapping[str, str] | None = None,
) -> list[Path]:
    """Render one release's ``bundle/`` and ``bundle.Dockerfile`` under ``out_root`` (a build context)."""
    inputs = load_inputs(releases_file, registry=registry, digests=digests)
    return write(bundle_output(inputs, version), out_root)
