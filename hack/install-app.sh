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
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
NMO_VERSION=$version "$python" -m pip wheel --quiet --no-deps --wheel-dir "$wheels" .
"$python" -m pip install --quiet --no-compile --no-warn-script-location --only-binary=:all: \
  --target "$target" --find-links "$wheels" "node-maintenance-operator==$version"
# Console scripts name the build machine's interpreter; the image runs `python3 -m node_maintenance`.
rm -rf "$target/bin"
"$python" -m compileall -q -j 0 --invalidation-mode unchecked-hash -s "$target" -p "$prefix" "$target" >/dev/null
