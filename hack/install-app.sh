#!/bin/sh
# Install the operator at release VERSION, with its dependencies, into TARGET, as the operator image
# holds it under PREFIX (default TARGET): the one recipe that both the Dockerfile's build stage and
# `nmo-pack images` (which needs no container engine) run. Wheels only, no compiler; bytecode is
# compiled ahead with hash-based invalidation, because the image's root filesystem is read-only.
set -eu
if [ $# -lt 2 ]; then
  echo "usage: install-app.sh VERSION TARGET [PREFIX]  (VERSION: a release in releases.yaml)" >&2
  exit 2
fi
version=$1 target=$2 prefix=${3:-$2}
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Build from a clean copy of exactly what the Dockerfile copies: a work tree's build/ and *.egg-info
# would otherwise leak stale modules into the wheel.
mkdir "$work/src" "$work/wheels"
tar -cf - --exclude='__pycache__' --exclude='*.egg-info' pyproject.toml setup.py releases.yaml README.md operator |
  tar -xf - -C "$work/src"
(cd "$work/src" && NMO_VERSION=$version "$python" -m pip wheel --quiet --no-deps --wheel-dir "$work/wheels" .)
"$python" -m pip install --quiet --no-compile --no-warn-script-location --only-binary=:all: \
  --target "$target" --find-links "$work/wheels" "node-maintenance-operator==$version"
# Console scripts name the build machine's interpreter; the image runs `python3 -m node_maintenance`.
rm -rf "$target/bin"
"$python" -m compileall -q -j 0 --invalidation-mode unchecked-hash -s "$target" -p "$prefix" "$target" >/dev/null
