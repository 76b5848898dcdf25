#!/bin/sh
# Install the operator at release VERSION, with its dependencies, into TARGET, as the operator image
# holds it under PREFIX (default TARGET): the one recipe that both the Dockerfile's build stage and
# `nmo-pack images` (which needs no container engine) run. Wheels only, no compiler; bytecode is
# compiled ahead with hash-based invalidation, because the image's root filesystem is read-only.
# The dependencies are exactly those of hack/operator-image.lock (`make lock` writes it from pyproject.toml),
# each wheel checked against the lock's hashes when it is downloaded and again when it is installed, from
# the downloaded wheels alone (no index): nothing of the same name elsewhere can take their place. The wheel
# is built by the backend of hack/build-backend.lock (pyproject.toml's build-system, locked the same way), not
# by whatever setuptools the index offers that day: its version is written into the image (dist-info/WHEEL),
# so two builds of the same source, a day apart, give the same image.
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
"$python" -m pip install --quiet --only-binary=:all: --require-hashes --no-warn-script-location --target "$work/backend" \
  -r hack/build-backend.lock
(cd "$work/src" && PYTHONPATH="$work/backend" NMO_VERSION=$version "$python" -m pip wheel --quiet --no-deps --no-build-isolation \
  --wheel-dir "$work/wheels" .)
"$python" -m pip download --quiet --only-binary=:all: --require-hashes --dest "$work/deps" -r hack/operator-image.lock
# The operator's own wheel, built just now, is pinned by its own hash beside the lock's. It is named as a
# requirement found among the wheels, not by its path: pip would record a path (a temporary one) in the
# install's direct_url.json, and two builds of the same source would differ.
for wheel in "$work/wheels"/*.whl; do
  echo "node-maintenance-operator==$version --hash=sha256:$("$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$wheel")"
done > "$work/operator.txt"
"$python" -m pip install --quiet --no-index --require-hashes --only-binary=:all: --no-compile --no-warn-script-location \
  --target "$target" --find-links "$work/deps" --find-links "$work/wheels" -r hack/operator-image.lock -r "$work/operator.txt"
# Console scripts name the build machine's interpreter; the image runs `python3 -m node_maintenance`. pip's records
# of them go too: their hashes follow that interpreter's path, and two checkouts would build two images.
rm -rf "$target/bin"
for record in "$target"/*.dist-info/RECORD; do
  sed -i '/^\(\.\.\/\)*bin\//d' "$record"
done
"$python" -m compileall -q -j 0 --invalidation-mode unchecked-hash -s "$target" -p "$prefix" "$target" >/dev/null
