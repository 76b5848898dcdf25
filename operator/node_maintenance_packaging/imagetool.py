"""Build and push OCI images with whatever real tool the machine has.

buildah, podman or docker (when its daemon answers) build from the Dockerfile as it is. Without any
of them, the daemonless path assembles the same image with umoci (layers and config) and pushes it
with skopeo; it understands the Dockerfile instructions our images use (FROM, ARG, LABEL, COPY,
ENTRYPOINT, CMD) and refuses anything else by name.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .errors import PackagingError

ENGINES = ("buildah", "podman", "docker")
TOOLS = (*ENGINES, "umoci")


def _run(argv: list[str], what: str) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True)
    except FileNotFoundError:
        raise PackagingError(f"{what}: {argv[0]} is not installed; install it or pick another --tool") from None
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise PackagingError(f"{what} failed: {detail[-1] if detail else f'exit {result.returncode}'}")
    return result.stdout


def available(tool: str) -> bool:
    if shutil.which(tool) is None:
        return False
    if tool == "docker":  # the client alone is not enough: it needs a daemon
        return subprocess.run(["docker", "info"], capture_output=True).returncode == 0
    if tool == "umoci":
        return shutil.which("skopeo") is not None
    return True


def pick(preferred: str) -> str:
    if preferred != "auto":
        if not available(preferred):
            need = "umoci and skopeo" if preferred == "umoci" else preferred + (" with a running daemon" if preferred == "docker" else "")
            raise PackagingError(f"--tool {preferred}: {need} not available on this machine; install it or use --tool auto")
        return preferred
    for tool in TOOLS:
        if available(tool):
            return tool
    raise PackagingError("no image tool found: install buildah (or podman, or docker with its daemon, or umoci and skopeo)")


@dataclass
class Dockerfile:
    """The subset of a Dockerfile the daemonless path understands."""

    base: str = "scratch"
    labels: dict[str, str] = field(default_factory=dict)
    copies: list[tuple[str, str]] = field(default_factory=list)
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None

    @classmethod
    def parse(cls, path: Path, build_args: dict[str, str]) -> "Dockerfile":
        spec, args = cls(), dict(build_args)
        for number, raw in enumerate(path.read_text().splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            instruction, _, rest = line.partition(" ")
            instruction = instruction.upper()
            for key, value in args.items():
                rest = rest.replace("${" + key + "}", value).replace("$" + key, value)
            if instruction == "ARG":
                key, _, default = rest.partition("=")
                args.setdefault(key, default)
            elif instruction == "FROM":
                spec.base = rest
            elif instruction == "LABEL":
                key, _, value = rest.partition("=")
                spec.labels[key] = value.strip('"')
            elif instruction == "COPY":
                src, dest = shlex.split(rest)
                spec.copies.append((src, dest))
            elif instruction in ("ENTRYPOINT", "CMD"):
                setattr(spec, instruction.lower(), json.loads(rest))
            else:
                raise PackagingError(f"{path.name}:{number}: {instruction} is not supported without a container engine; install buildah")
        return spec


@dataclass
class Builder:
    tool: str
    tls_verify: bool = True
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="nmo-images-")))

    def _buildah(self) -> list[str]:
        # Private storage per run: nothing outside it is touched, and it is removed at the end.
        return ["buildah", "--storage-driver", "vfs", "--root", str(self.workdir / "root"), "--runroot", str(self.workdir / "run")]

    def build_and_push(self, context: Path, dockerfile: Path, reference: str, build_args: dict[str, str] | None = None) -> str:
        """Build ``dockerfile`` in ``context``, push it as ``reference``, return its manifest digest."""
        build_args = build_args or {}
        if self.tool == "umoci":
            return self._umoci(context, dockerfile, reference, build_args)
        arg_flags = [flag for key, value in build_args.items() for flag in ("--build-arg", f"{key}={value}")]
        tls = [f"--tls-verify={str(self.tls_verify).lower()}"] if self.tool != "docker" else []
        digest_file = self.workdir / "digest"
        if self.tool == "buildah":
            _run([*self._buildah(), "bud", "--isolation", "chroot", "--timestamp", "0", *tls, *arg_flags,
                  "-f", str(dockerfile), "-t", reference, str(context)], f"building {reference}")
            _run([*self._buildah(), "push", *tls, "--digestfile", str(digest_file), reference, f"docker://{reference}"],
                 f"pushing {reference}")
        elif self.tool == "podman":
            _run(["podman", "build", "--timestamp", "0", *tls, *arg_flags, "-f", str(dockerfile), "-t", reference, str(context)], f"building {reference}")
            _run(["podman", "push", *tls, "--digestfile", str(digest_file), reference], f"pushing {reference}")
        else:
            _run(["docker", "build", *arg_flags, "-f", str(dockerfile), "-t", reference, str(context)], f"building {reference}")
            out = _run(["docker", "push", reference], f"pushing {reference}")
            digest_file.write_text(out.split("digest: ")[-1].split()[0])
        return digest_file.read_text().strip()

    def _umoci(self, context: Path, dockerfile: Path, reference: str, build_args: dict[str, str]) -> str:
        spec = Dockerfile.parse(dockerfile, build_args)
        layout, tag = self.workdir / "oci", "build"
        tls = f"--src-tls-verify={str(self.tls_verify).lower()}"
        if spec.base == "scratch":
            shutil.rmtree(layout, ignore_errors=True)
            _run(["umoci", "init", "--layout", str(layout)], "creating an OCI layout")
            _run(["umoci", "new", "--image", f"{layout}:{tag}"], "creating an empty image")
        else:
            _run(["skopeo", "copy", tls, f"docker://{spec.base}", f"oci:{layout}:{tag}"], f"fetching base image {spec.base}")
        for src, dest in spec.copies:
            # umoci records file times as they are; pin them so equal inputs give equal layers.
            staged = self.workdir / "stage" / src
            shutil.rmtree(staged, ignore_errors=True)
            shutil.copytree(context / src, staged)
            for item in [staged, *staged.rglob("*")]:
                os.utime(item, (0, 0), follow_symlinks=False)
            _run(["umoci", "insert", "--image", f"{layout}:{tag}", "--history.created", "1970-01-01T00:00:00Z", str(staged), dest],
                 f"adding {src} to {reference}")
        config = ["umoci", "config", "--image", f"{layout}:{tag}", "--created", "1970-01-01T00:00:00Z", "--history.created", "1970-01-01T00:00:00Z"]
        config += [flag for key, value in spec.labels.items() for flag in ("--config.label", f"{key}={value}")]
        if spec.entrypoint is not None:
            config += [flag for part in spec.entrypoint for flag in ("--config.entrypoint", part)]
        if spec.cmd is not None:
            config += [flag for part in spec.cmd for flag in ("--config.cmd", part)]
        _run(config, f"configuring {reference}")
        digest_file = self.workdir / "digest"
        _run(["skopeo", "copy", f"--dest-tls-verify={str(self.tls_verify).lower()}", "--digestfile", str(digest_file),
              f"oci:{layout}:{tag}", f"docker://{reference}"], f"pushing {reference}")
        return digest_file.read_text().strip()

    def close(self) -> None:
        if self.tool == "buildah" and (self.workdir / "root").exists():
            subprocess.run([*self._buildah(), "rm", "--all"], capture_output=True)
        shutil.rmtree(self.workdir, ignore_errors=True)
