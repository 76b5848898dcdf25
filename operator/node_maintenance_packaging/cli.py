"""nmo-pack: render and check the CRD, bundles, catalog, OLM deploy manifests, API reference and monitoring files."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from . import images
from .deploy import APPROVALS, DeployParameters
from .errors import PackagingError
from .files import Output, differences, write
from .render import (
    RELEASES_FILE,
    Inputs,
    all_output,
    bundle_output,
    catalog_output,
    chart_output,
    crd_output,
    deploy_output,
    docs_output,
    load_inputs,
    monitoring_output,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler  # set by the chosen subcommand
    try:
        return handler(args)
    except PackagingError as exc:
        print(f"nmo-pack: error: {exc}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", type=Path, default=Path("."), help="repository top: where releases.yaml is and outputs go (default: .)")
    common.add_argument("--registry", help="image registry prefix instead of releases.yaml's, e.g. quay.io/myorg")
    common.add_argument("--templates", type=Path, help="render from this templates directory instead of the packaged one")
    common.add_argument("--pin-digests", type=Path, metavar="FILE", help="JSON/YAML mapping of tagged image reference to sha256 digest; pins those images")
    common.add_argument("--check", action="store_true", help="render in memory, print a diff and exit 1 if any file differs")

    parser = argparse.ArgumentParser(prog="nmo-pack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, render: Callable[[Inputs, argparse.Namespace], Output]) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        cmd.set_defaults(handler=lambda args: _run(args, render))
        return cmd

    command("crd", "render the current release's CRD into bundle/manifests", lambda i, a: crd_output(i))
    bundle = command(
        "bundle",
        "render one release's bundle/ and bundle.Dockerfile (the current release into the repository by default)",
        lambda i, a: bundle_output(i, a.release),
    )
    bundle.add_argument("--release", metavar="VERSION", help="release to render (default: the newest)")
    bundle.add_argument("--out", type=Path, metavar="DIR", help="build-context directory to render into instead of --root")
    command("catalog", "render the file-based catalog of every release and catalog.Dockerfile", lambda i, a: catalog_output(i))
    deploy = command("deploy", "render olm-deploy-manifests/ for Kubernetes and OpenShift", lambda i, a: deploy_output(i, _deploy(i, a)))
    command("docs", "render docs/api.md from the API schemas", lambda i, a: docs_output(i))
    command("monitoring", "render monitoring/: the ServiceMonitor, the alerts (PrometheusRule) and a Grafana dashboard",
            lambda i, a: monitoring_output(i))
    command("chart", "render charts/node-maintenance-operator: the current release's Helm chart, for clusters without OLM",
            lambda i, a: chart_output(i))
    everything = command("all", "render everything above (the current bundle, catalog, deploy manifests, docs, monitoring, chart)",
                         lambda i, a: all_output(i, _deploy(i, a)))
    for cmd in (deploy, everything):
        cmd.add_argument("--catalog-image", help="catalog image the CatalogSource runs (default: from releases.yaml)")
        cmd.add_argument("--version", help="release the Subscription starts at (default: the newest)")
        cmd.add_argument("--approval", choices=APPROVALS, default="Automatic", help="install plan approval (default: Automatic)")
    images.register(sub)
    return parser


def _deploy(inputs: Inputs, args: argparse.Namespace) -> DeployParameters:
    default = inputs.default_deploy()
    version = args.version or default.version
    inputs.releases.get(version)
    return DeployParameters(catalog_image=args.catalog_image or default.catalog_image, version=version, approval=args.approval)


def _run(args: argparse.Namespace, render: Callable[[Inputs, argparse.Namespace], Output]) -> int:
    inputs = load_inputs(
        args.root / RELEASES_FILE,
        registry=args.registry,
        digests=_digests(args.pin_digests),
        templates_dir=args.templates,
    )
    output = render(inputs, args)
    target = getattr(args, "out", None) or args.root
    if args.check:
        diffs = differences(output, target)
        if diffs:
            sys.stdout.write("".join(diffs))
            print(f"nmo-pack: {len(diffs)} rendered file(s) out of date; run `nmo-pack {args.command}` and commit the result", file=sys.stderr)
            return 1
        print(f"nmo-pack: {len(output.files)} file(s) up to date", file=sys.stderr)
        return 0
    written = write(output, target)
    print(f"nmo-pack: rendered {len(written)} file(s) under {target}", file=sys.stderr)
    return 0


def _digests(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        mapping = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise PackagingError(f"--pin-digests {path}: cannot read it ({exc}); give a JSON or YAML file") from None
    if not isinstance(mapping, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
        raise PackagingError(f"--pin-digests {path}: expected a mapping of image reference to digest, e.g. {json.dumps({'registry/name:tag': 'sha256:…'})}")
    return mapping


if __name__ == "__main__":
    sys.exit(main())
