"""An opm base image built here from the opm binary (built from its Go module), so the catalog image
needs nothing from an outside registry."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from node_maintenance_packaging.imagetool import Builder, pick

from . import toolchain

CONTAINERFILE = """\
FROM scratch
COPY rootfs/ /
ENTRYPOINT ["/bin/opm"]
"""


def _shared_libraries(binary: Path) -> list[Path]:
    """The libraries the dynamic loader maps for ``binary`` (opm links libc for sqlite)."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    paths = [Path(part) for line in out.splitlines() for part in line.split() if part.startswith("/")]
    return [p for p in paths if p.exists()]


def build_opm_image(registry_host: str, builder_tool: str = "auto") -> str:
    """Build and push ``<registry>/opm:<version>``; return the pushed reference by digest."""
    opm = toolchain.binary("opm")
    context = Path(tempfile.mkdtemp(prefix="nmo-opm-image-"))
    builder = Builder(pick(builder_tool), tls_verify=False)
    try:
        rootfs = context / "rootfs"
        (rootfs / "bin").mkdir(parents=True)
        (rootfs / "tmp").mkdir()
        shutil.copy(opm, rootfs / "bin" / "opm")
        for library in _shared_libraries(opm):
            target = rootfs / library.relative_to("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(library.resolve(), target)
        (context / "Containerfile").write_text(CONTAINERFILE)
        reference = f"{registry_host}/opm:local"
        digest = builder.build_and_push(context, context / "Containerfile", reference)
        return f"{registry_host}/opm@{digest}"
    finally:
        builder.close()
        shutil.rmtree(context, ignore_errors=True)
