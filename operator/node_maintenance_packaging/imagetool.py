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
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from .errors import PackagingError

ENGINES = ("buildah", "podman", "docker")
TOOLS = (*ENGINES, "umoci")
LAYOUT_TAG = "build"  # the tag an assembled image has in its OCI layout


def run_tool(argv: list[str], what: str) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True)
    except FileNotFoundError:
        raise PackagingError(f"{what}: {argv[0]} is not installed; install it or pick another --tool") from None
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise PackagingError(f"{what} failed: {detail[-1] if detail else f'exit {result.returncode}'}")
    return result.stdout


def registry_host(registry: str) -> str:
    """The host a registry prefix (``host[:port]/path``) pushes to: its first component when that names a host (a dot,
    a port or localhost, as image references are read), else Docker Hub's."""
    first = registry.split("/", 1)[0]
    return first if "." in first or ":" in first or first == "localhost" else "registry-1.docker.io"


def unanswered(registry: str, tls_verify: bool, timeout: float = 10.0) -> str:
    """Why nothing answers at ``registry``'s host ("" when something does), asked before anything is built, so that a
    wrong --registry fails in a second, not after the first image. Any answer counts: an HTTP status (401 asks for the
    login the push brings) or a TLS handshake (the push's tool may trust a CA this process does not); a plain-HTTP
    registry is tried only when TLS is not verified, as the tools then fall back to it."""
    reason = ""
    for scheme in ("https", "http") if not tls_verify else ("https",):
        try:
            urllib.request.urlopen(f"{scheme}://{registry_host(registry)}/v2/", timeout=timeout).close()
            return ""
        except urllib.error.HTTPError:
            return ""
        except urllib.error.URLError as error:
            if isinstance(error.reason, ssl.SSLError):  # a TLS handshake, whatever its certificate: something answers
                return ""
            reason = str(error.reason)
        except OSError as error:  # a connection reset or a timeout while reading the answer
            reason = str(error)
    return reason


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
    """The final stage of a Dockerfile, as far as the daemonless path understands it.

    Earlier stages are not run: the caller provides their results as directories (``COPY --from``).
    """

    base: str = "scratch"
    labels: dict[str, str] = field(default_factory=dict)
    copies: list[tuple[str | None, str, str]] = field(default_factory=list)  # (stage, source, destination)
    env: dict[str, str] = field(default_factory=dict)
    user: str | None = None
    exposed: list[str] = field(default_factory=list)
    workdir: str | None = None
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None

    @classmethod
    def parse(cls, path: Path, build_args: dict[str, str]) -> Dockerfile:
        lines = [line.strip() for line in path.read_text().splitlines()]
        numbered = [(n, line) for n, line in enumerate(lines, 1) if line and not line.startswith("#")]
        froms = [i for i, (_, line) in enumerate(numbered) if line.upper().startswith("FROM ")]
        if not froms:
            raise PackagingError(f"{path.name}: no FROM instruction")
        # Global ARGs (before the first FROM) and the final stage's instructions.
        args: dict[str, str] = {}
        for _, line in numbered[: froms[0]]:
            cls._arg(line, args, build_args)
        spec = cls()
        for number, line in numbered[froms[-1]:]:
            instruction, _, rest = line.partition(" ")
            instruction = instruction.upper()
            rest = _substitute(rest, args)
            if instruction == "ARG":
                cls._arg(line, args, build_args)
            elif instruction == "FROM":
                spec.base = rest.split()[0]
            elif instruction == "LABEL":
                key, _, value = rest.partition("=")
                spec.labels[key] = value.strip('"')
            elif instruction == "ENV":
                key, _, value = rest.partition("=")
                spec.env[key] = value.strip('"')
            elif instruction == "COPY":
                words = shlex.split(rest)
                stage = words.pop(0).removeprefix("--from=") if words[0].startswith("--from=") else None
                spec.copies.append((stage, *words))  # type: ignore[arg-type]
            elif instruction == "USER":
                spec.user = rest
            elif instruction == "EXPOSE":
                spec.exposed += rest.split()
            elif instruction == "WORKDIR":
                spec.workdir = rest
            elif instruction in ("ENTRYPOINT", "CMD"):
                setattr(spec, instruction.lower(), json.loads(rest))
            else:
                raise PackagingError(f"{path.name}:{number}: {instruction} is not supported without a container engine; install buildah")
        return spec

    @staticmethod
    def _arg(line: str, args: dict[str, str], build_args: dict[str, str]) -> None:
        """A build argument wins; a stage's bare ARG keeps the global value; else the declared default."""
        key, _, default = line.partition(" ")[2].partition("=")
        if key in build_args:
            args[key] = build_args[key]
        elif key not in args:
            args[key] = _substitute(default, args)


def _substitute(text: str, args: dict[str, str]) -> str:
    for key, value in args.items():
        text = text.replace("${" + key + "}", value).replace("$" + key, value)
    return text


def _source(reference: str) -> str:
    """A skopeo source: an image in a registry, or an OCI layout given as ``oci:DIR:TAG``."""
    return reference if reference.startswith("oci:") else f"docker://{reference}"


@dataclass
class Builder:
    tool: str
    tls_verify: bool = True
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="nmo-images-")))
    # host:container[:options] mounts for RUN steps only (an engine's --volume), e.g. the build
    # machine's CA bundle where a proxy re-signs TLS; nothing of them goes into the image.
    run_volumes: tuple[str, ...] = ()

    def _buildah(self) -> list[str]:
        # Private storage per run: nothing outside it is touched, and it is removed at the end.
        return ["buildah", "--storage-driver", "vfs", "--root", str(self.workdir / "root"), "--runroot", str(self.workdir / "run")]

    def build_and_push(self, context: Path, dockerfile: Path, reference: str, build_args: dict[str, str] | None = None) -> str:
        """Build ``dockerfile`` in ``context``, push it as ``reference``, return its manifest digest."""
        build_args = build_args or {}
        if self.tool == "umoci":
            return self.assemble_and_push(context, dockerfile, reference, build_args)
        arg_flags = [flag for key, value in build_args.items() for flag in ("--build-arg", f"{key}={value}")]
        arg_flags += [flag for volume in self.run_volumes for flag in ("--volume", volume)]
        tls = [f"--tls-verify={str(self.tls_verify).lower()}"] if self.tool != "docker" else []
        digest_file = self.workdir / "digest"
        if self.tool == "buildah":
            run_tool([*self._buildah(), "bud", "--isolation", "chroot", "--timestamp", "0", *tls, *arg_flags,
                  "-f", str(dockerfile), "-t", reference, str(context)], f"building {reference}")
            run_tool([*self._buildah(), "push", *tls, "--digestfile", str(digest_file), reference, f"docker://{reference}"],
                 f"pushing {reference}")
        elif self.tool == "podman":
            run_tool(["podman", "build", "--timestamp", "0", *tls, *arg_flags, "-f", str(dockerfile), "-t", reference, str(context)], f"building {reference}")
            run_tool(["podman", "push", *tls, "--digestfile", str(digest_file), reference], f"pushing {reference}")
        else:
            run_tool(["docker", "build", *arg_flags, "-f", str(dockerfile), "-t", reference, str(context)], f"building {reference}")
            out = run_tool(["docker", "push", reference], f"pushing {reference}")
            digest_file.write_text(out.split("digest: ")[-1].split()[0])
        return digest_file.read_text().strip()

    def assemble_and_push(self, context: Path, dockerfile: Path, reference: str, build_args: dict[str, str],
                          stages: dict[str, Path] | None = None) -> str:
        """Without an engine: the final stage of ``dockerfile`` on its base, with ``stages`` standing for
        the root filesystems of earlier stages that ``COPY --from`` reads; push it, return its digest."""
        return self.push_layout(self.assemble(context, dockerfile, reference, build_args, stages), reference)

    def assemble(self, context: Path, dockerfile: Path, reference: str, build_args: dict[str, str],
                 stages: dict[str, Path] | None = None) -> Path:
        """The image of ``assemble_and_push`` as an OCI layout (tag ``LAYOUT_TAG``), not pushed."""
        spec = Dockerfile.parse(dockerfile, build_args)
        layout, tag = self.workdir / "oci", LAYOUT_TAG
        shutil.rmtree(layout, ignore_errors=True)
        tls = f"--src-tls-verify={str(self.tls_verify).lower()}"
        if spec.base == "scratch":
            run_tool(["umoci", "init", "--layout", str(layout)], "creating an OCI layout")
            run_tool(["umoci", "new", "--image", f"{layout}:{tag}"], "creating an empty image")
        else:
            run_tool(["skopeo", "copy", tls, _source(spec.base), f"oci:{layout}:{tag}"], f"fetching base image {spec.base}")
        for stage, src, dest in spec.copies:
            if stage is not None and stage not in (stages or {}):
                raise PackagingError(f"{dockerfile.name}: COPY --from={stage} needs that stage built; build with an engine (buildah, podman, docker)")
            source = (stages[stage] / src.lstrip("/")) if stage is not None and stages else context / src
            # umoci records file times as they are; pin them so equal inputs give equal layers.
            staged = self.workdir / "stage" / src.lstrip("/")
            shutil.rmtree(staged, ignore_errors=True)
            shutil.copytree(source, staged, symlinks=True)
            for item in [staged, *staged.rglob("*")]:
                os.utime(item, (0, 0), follow_symlinks=False)
            run_tool(["umoci", "insert", "--image", f"{layout}:{tag}", "--history.created", "1970-01-01T00:00:00Z", str(staged), dest],
                 f"adding {src} to {reference}")
        config = ["umoci", "config", "--image", f"{layout}:{tag}", "--created", "1970-01-01T00:00:00Z", "--history.created", "1970-01-01T00:00:00Z"]
        config += [flag for key, value in spec.labels.items() for flag in ("--config.label", f"{key}={value}")]
        config += [flag for key, value in spec.env.items() for flag in ("--config.env", f"{key}={value}")]
        config += [flag for port in spec.exposed for flag in ("--config.exposedports", port)]
        if spec.user is not None:
            config += ["--config.user", spec.user]
        if spec.workdir is not None:
            config += ["--config.workingdir", spec.workdir]
        if spec.entrypoint is not None:
            config += [flag for part in spec.entrypoint for flag in ("--config.entrypoint", part)]
        if spec.cmd is not None:
            config += [flag for part in spec.cmd for flag in ("--config.cmd", part)]
        run_tool(config, f"configuring {reference}")
        return layout

    def push_layout(self, layout: Path, reference: str) -> str:
        """Push the image an OCI layout holds under ``LAYOUT_TAG`` as ``reference``; return its digest."""
        digest_file = self.workdir / "digest"
        run_tool(["skopeo", "copy", f"--dest-tls-verify={str(self.tls_verify).lower()}", "--digestfile", str(digest_file),
              f"oci:{layout}:{LAYOUT_TAG}", f"docker://{reference}"], f"pushing {reference}")
        return digest_file.read_text().strip()

    def close(self) -> None:
        if self.tool == "buildah" and (self.workdir / "root").exists():
            subprocess.run([*self._buildah(), "rm", "--all"], capture_output=True)
        shutil.rmtree(self.workdir, ignore_errors=True)
