"""Images of upstream tools, built here from their pinned Go modules so nothing comes from an outside registry.

- ``opm``: opm (with the libraries it links) and ``grpc_health_probe``, as upstream's opm image ships
  them: the base of our catalog image, whose registry pod OLM probes with ``grpc_health_probe``, and
  the image OLM's bundle unpack Jobs run ``opm alpha bundle extract`` in.
- ``olm-util``: the parts of upstream's OLM image that run in pods, laid out and run as that image's
  Dockerfile does (``/bin``, user 1001): ``cpb`` and a ``/bin/cp``, which an unpack Job's init container
  runs to copy ``cpb`` into the bundle container (bundle images are FROM scratch), and ``package-server``,
  which the packageserver CSV's Deployment runs.
- ``scorecard-test``: operator-sdk scorecard's tests, the image the bundle's scorecard configuration names upstream's
  of, and the untar image the scorecard's pods unpack the bundle with (a busybox, which runs the ``tar`` the pod's
  arguments name), both run as upstream's images run them (user 1001).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from node_maintenance_packaging.catalog import OPM_REPOSITORY, OPM_VERSION
from node_maintenance_packaging.imagetool import Builder, pick

from . import toolchain

# PATH: a scorecard configuration's entrypoint names its command bare (`scorecard-test`), as upstream's images answer it.
CONTAINERFILE = 'FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin\n{user}ENTRYPOINT ["{entrypoint}"]\n'
# Upstream's OLM and scorecard images run as this user: the pods that run them ask for a non-root user without naming one.
UPSTREAM_IMAGE_USER = 1001
# A statically linked busybox answers as `cp` when called as /bin/cp.
BUSYBOX = Path("/bin/busybox")


def _shared_libraries(binary: Path) -> list[Path]:
    """The libraries the dynamic loader maps for ``binary`` (opm links libc for sqlite)."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    paths = [Path(part) for line in out.splitlines() for part in line.split() if part.startswith("/")]
    return [p for p in paths if p.exists()]


def _install(binary: Path, rootfs: Path, name: str) -> None:
    target = rootfs / "bin" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(binary, target)
    for library in _shared_libraries(binary):
        copy = rootfs / library.relative_to("/")
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(library.resolve(), copy)


def _build(registry: str, name: str, binaries: dict[str, Path], entrypoint: str, builder_tool: str, tag: str = "local",
           user: int | None = None) -> str:
    context = Path(tempfile.mkdtemp(prefix=f"nmo-{name}-image-"))
    builder = Builder(pick(builder_tool), tls_verify=False)
    try:
        rootfs = context / "rootfs"
        (rootfs / "tmp").mkdir(parents=True)
        (rootfs / "tmp").chmod(0o1777)  # registry pods run as a non-root user and write their cache there
        for target, binary in binaries.items():
            _install(binary, rootfs, target)
        user_line = f"USER {user}\n" if user is not None else ""
        (context / "Containerfile").write_text(CONTAINERFILE.format(entrypoint=entrypoint, user=user_line))
        digest = builder.build_and_push(context, context / "Containerfile", f"{registry}/{name}:{tag}")
        return f"{registry}/{name}@{digest}"
    finally:
        builder.close()
        shutil.rmtree(context, ignore_errors=True)


def _busybox(needed_for: str) -> Path:
    if not BUSYBOX.exists():
        raise RuntimeError(f"busybox is needed for {needed_for}: install Debian's busybox-static")
    return BUSYBOX


def build_opm_image(registry: str, builder_tool: str = "auto") -> str:
    """Build and push ``<registry>/opm:<version>``, where the catalog image expects it; return it by digest."""
    tools = toolchain.ensure(["opm", "grpc_health_probe"])
    return _build(registry, OPM_REPOSITORY, tools, "/bin/opm", builder_tool, OPM_VERSION)


def build_util_image(registry: str, builder_tool: str = "auto") -> str:
    """Build and push ``<registry>/olm-util`` (OLM's ``-util-image`` and the package server's image); return it by digest."""
    binaries = {**toolchain.ensure(["cpb", "package-server"]), "cp": _busybox("the OLM util image's /bin/cp")}
    return _build(registry, "olm-util", binaries, "/bin/cpb", builder_tool, user=UPSTREAM_IMAGE_USER)


def build_scorecard_images(registry: str, version: str, builder_tool: str = "auto") -> tuple[str, str]:
    """Build and push ``<registry>/scorecard-test:<version>`` (``version``: the operator-sdk release the tools pin) and
    ``<registry>/scorecard-untar``; return both by digest: the test image, and operator-sdk scorecard's ``--untar-image``."""
    test_image = _build(registry, "scorecard-test", toolchain.ensure(["scorecard-test"]), "/bin/scorecard-test", builder_tool,
                        version, user=UPSTREAM_IMAGE_USER)
    untar_image = _build(registry, "scorecard-untar", {"busybox": _busybox("the scorecard's untar image")}, "/bin/busybox",
                         builder_tool, user=UPSTREAM_IMAGE_USER)
    return test_image, untar_image
