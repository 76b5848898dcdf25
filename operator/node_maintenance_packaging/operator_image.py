"""The operator image, assembled without a container engine and without any outside registry.

Its base is a Python root filesystem made here from Debian's packages (cached, keyed by what goes
into it); the operator and its dependencies are installed by ``hack/install-app.sh``, the recipe the
Dockerfile's build stage runs; everything else (labels, user, environment, entry point) is read from
the Dockerfile's final stage, so the Dockerfile stays the one description of the image.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .errors import PackagingError
from .imagetool import Builder, Dockerfile, run_tool

DEBIAN_SUITE = "bookworm"
# Python and what it needs to speak TLS to the API server; mmdebstrap's `essential` variant adds the
# Debian essential set (a shell, coreutils, dpkg), and no compiler and no pip.
BASE_PACKAGES = ("python3-minimal", "libpython3.11-stdlib", "ca-certificates")
# The base of the Dockerfile's build stage when a container engine builds it (the stage runs pip).
BUILD_BASE_PACKAGES = (*BASE_PACKAGES, "python3-pip")
_EXCLUDED_PATHS = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")


def _mmdebstrap(packages: tuple[str, ...]) -> tuple[str, ...]:
    return (
        "mmdebstrap", "--quiet", "--variant=essential", f"--include={','.join(packages)}",
        *(f"--dpkgopt=path-exclude={path}" for path in _EXCLUDED_PATHS),
        # Nothing of the build's own state (apt lists, caches, logs) goes into the image.
        '--customize-hook=rm -rf "$1"/var/cache/* "$1"/var/lib/apt/lists/* "$1"/var/log/*',
        DEBIAN_SUITE,
    )
EPOCH = "1970-01-01T00:00:00Z"
BUILD_STAGE = "build"


def image_cache() -> Path:
    """Where the Python bases and the operator images (``--cache``) are kept between runs: outside the work tree,
    like the Go tool cache."""
    if env := os.environ.get("NMO_IMAGE_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "node-maintenance-operator" / "images"


def base_layout(cache: Path | None = None, packages: tuple[str, ...] = BASE_PACKAGES) -> str:
    """The Debian Python base as an OCI layout reference (``oci:DIR:TAG``), built on first use.

    ``packages`` other than the default make a base for another purpose (a build stage with pip, say).
    """
    command = _mmdebstrap(packages)
    key = hashlib.sha256("\0".join(command).encode()).hexdigest()[:16]
    layout = (cache or image_cache()) / f"python-base-{key}"
    reference = f"oci:{layout}:base"
    if (layout / ".complete").exists():
        return reference
    if shutil.which("mmdebstrap") is None:
        raise PackagingError("mmdebstrap is not installed (Debian package mmdebstrap); install it, or give --base-image")
    layout.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{layout}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time: a process that waited finds the base built
        if not (layout / ".complete").exists():
            _build_base(layout, command, packages)
    return reference


def _build_base(layout: Path, command: tuple[str, ...], packages: tuple[str, ...]) -> None:
    shutil.rmtree(layout, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="nmo-base-") as scratch:
        rootfs = Path(scratch) / "rootfs.tar"
        print(f"nmo-pack: making the Python base image from Debian {DEBIAN_SUITE} (once; cached)", file=sys.stderr)
        mode = [] if os.geteuid() == 0 else ["--mode=unshare"]
        run_tool([command[0], *mode, *command[1:], str(rootfs)], "making the Python base with mmdebstrap")
        run_tool(["umoci", "init", "--layout", str(layout)], "creating the base layout")
        run_tool(["umoci", "new", "--image", f"{layout}:base"], "creating the base image")
        run_tool(["umoci", "raw", "add-layer", "--image", f"{layout}:base", "--history.created", EPOCH,
              "--history.created_by", f"mmdebstrap {DEBIAN_SUITE} {' '.join(packages)}", str(rootfs)],
             "adding the base layer")
        run_tool(["umoci", "config", "--image", f"{layout}:base", "--created", EPOCH, "--no-history",
              "--config.env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], "configuring the base")
    (layout / ".complete").write_text("")


def install_app(root: Path, version: str, stage_root: Path, prefix: str) -> None:
    """Run the build stage's recipe with this interpreter: the operator at ``version`` into ``stage_root/prefix``."""
    target = stage_root / prefix.lstrip("/")
    result = subprocess.run(["sh", "hack/install-app.sh", version, str(target), prefix], cwd=root,
                            env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True)
    if result.returncode != 0:
        raise PackagingError(f"installing the operator {version} for its image failed:\n{result.stderr.strip()[-2000:]}")


def build_operator_image(builder: Builder, root: Path, version: str, reference: str, base_image: str | None = None,
                         cache: Path | None = None) -> str:
    """Build the operator image of release ``version`` from the current source, push it, return its digest.

    With ``cache`` (a directory), an image already built from the same inputs is pushed as it was built;
    the build is reproducible, so it has the digest a fresh build would have: its dependencies are those
    of hack/operator-image.lock, by hash.
    """
    return builder.push_layout(operator_layout(builder, root, version, reference, base_image, cache), reference)


def operator_layout(builder: Builder, root: Path, version: str, reference: str, base_image: str | None = None,
                    cache: Path | None = None) -> Path:
    """The OCI layout of release ``version``'s operator image (``reference`` names it in messages): the one
    ``cache`` keeps for the same inputs, else built (and kept there)."""
    dockerfile = root / "Dockerfile"
    args = {"VERSION": version, "PYTHON_IMAGE": base_image or base_layout()}
    cached = cache / f"operator-{inputs_key(root, args)}" if cache else None
    if cached and (cached / ".complete").exists():
        os.utime(cached)  # used now: the last to be dropped
        return cached
    copies = [(stage, src) for stage, src, _ in Dockerfile.parse(dockerfile, args).copies if stage == BUILD_STAGE]
    if len(copies) != 1:
        raise PackagingError(f"Dockerfile: the final stage must take exactly one directory from the {BUILD_STAGE!r} stage")
    stage_root = Path(tempfile.mkdtemp(prefix="stage-build-", dir=builder.workdir))
    install_app(root, version, stage_root, copies[0][1])
    layout = builder.assemble(root, dockerfile, reference, args, stages={BUILD_STAGE: stage_root})
    if cached:
        store(layout, cached)
        return cached
    return layout


# What the build stage reads: the files install-app.sh packs, the recipe itself and the Dockerfile.
_INPUTS = ("Dockerfile", "hack/install-app.sh", "hack/operator-image.lock", "hack/build-backend.lock", "pyproject.toml", "setup.py", "releases.yaml", "README.md", "operator")


def inputs_key(root: Path, args: dict[str, str]) -> str:
    """What names an image built from the work tree's Dockerfile inputs (the build stage's files, as .dockerignore lets
    in) with the build arguments ``args``: a cache key (``PYTHON_IMAGE`` an OCI layout counts by its digest)."""
    digest = hashlib.sha256(json.dumps([sorted(args.items()), sys.version], sort_keys=True).encode())
    base = args["PYTHON_IMAGE"]
    if base.startswith("oci:"):  # a layout's index names the digest of the image it holds
        digest.update((Path(base.split(":")[1]) / "index.json").read_bytes())
    for name in _INPUTS:
        for path in sorted([root / name] if (root / name).is_file() else (root / name).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and not any(p.endswith(".egg-info") for p in path.parts):
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


# Operator images kept in the cache: every release's, for the sources of now and of one change before.
KEPT_OPERATOR_IMAGES = 10


def store(layout: Path, cached: Path) -> None:
    """Keep a built layout under ``cached``, whole or not at all (a concurrent build may race us), and
    drop the oldest of its kind (the name's part before the first "-") beyond KEPT_OPERATOR_IMAGES: each source change
    adds one per release."""
    scratch = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(layout, scratch, symlinks=True)
    (scratch / ".complete").write_text("")
    try:
        scratch.rename(cached)
    except OSError:  # another build stored it first
        shutil.rmtree(scratch, ignore_errors=True)
    kind = cached.name.split("-", 1)[0]
    kept = sorted((p for p in cached.parent.glob(f"{kind}-*") if "." not in p.name), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in kept[KEPT_OPERATOR_IMAGES:]:
        shutil.rmtree(old, ignore_errors=True)
