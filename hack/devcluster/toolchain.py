"""Build the upstream Go tools (Kubernetes, etcd, KWOK, opm, operator-sdk and its scorecard-test, OLM, Helm, Toxiproxy, promtool) from pinned modules.

Each tool module under ``hack/tools/<name>/`` pins its upstream release in ``go.mod``/``go.sum`` and
lists the binaries it provides as ``tool`` directives. Binaries are cached outside the work tree,
keyed by a hash of the module files, the Go version and the link flags, so a warm run builds nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TOOLS_DIR = Path(__file__).resolve().parent.parent / "tools"

KUBERNETES_VERSION = "v1.37.2"
_VERSION_FLAGS = " ".join(
    f"-X {pkg}.{var}={value}"
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    for var, value in (
        ("gitVersion", KUBERNETES_VERSION),
        ("gitMajor", "1"),
        ("gitMinor", KUBERNETES_VERSION.split(".")[1]),
        ("gitTreeState", "clean"),
    )
)


_OPERATOR_FRAMEWORK_TAGS = "json1 containers_image_openpgp"


@dataclass(frozen=True)
class ToolModule:
    """One pinned Go module under hack/tools and how its binaries are linked."""

    name: str
    ldflags: str = "-s -w"
    # Upstream builds containers/image with its pure-Go OpenPGP so no gpgme headers are needed.
    tags: str = ""
    # Binaries whose `go build` output name differs from what callers use.
    renames: tuple[tuple[str, str], ...] = ()
    # False links statically, for binaries copied into images that have no C library.
    cgo: bool = True

    @property
    def path(self) -> Path:
        return TOOLS_DIR / self.name

    def packages(self) -> list[str]:
        """The `tool` directives of the module's go.mod, as `go mod edit -json` reports them."""
        out = subprocess.run(
            ["go", "mod", "edit", "-json"], cwd=self.path, check=True, capture_output=True, text=True
        ).stdout
        tools = [tool["Path"] for tool in json.loads(out).get("Tool") or []]
        if not tools:
            raise RuntimeError(f"hack/tools/{self.name}/go.mod declares no tool directives")
        return tools


MODULES: dict[str, ToolModule] = {
    m.name: m
    for m in (
        # Kubernetes components carry their release in the version package; OLM checks minKubeVersion against it.
        ToolModule("kubernetes", ldflags=f"-s -w {_VERSION_FLAGS}", renames=(("server", "etcd"),)),
        ToolModule("kwok"),
        ToolModule("opm", tags=_OPERATOR_FRAMEWORK_TAGS),
        ToolModule("operator-sdk", tags=_OPERATOR_FRAMEWORK_TAGS),
        # operator-sdk scorecard's tests run in a FROM-scratch image, statically linked as upstream links them.
        ToolModule("scorecard-test", tags=_OPERATOR_FRAMEWORK_TAGS, cgo=False),
        ToolModule("olm", tags=_OPERATOR_FRAMEWORK_TAGS),
        # OLM's bundle-copy tool runs inside FROM-scratch bundle images, so it is linked statically.
        ToolModule("olm-util", tags=_OPERATOR_FRAMEWORK_TAGS, cgo=False),
        # OLM's package server runs in the FROM-scratch util image, statically linked as upstream links it.
        ToolModule("package-server", tags=_OPERATOR_FRAMEWORK_TAGS, cgo=False),
        # Renders OLM's own Helm chart into the manifests of an OLM release, as OLM's release script does.
        ToolModule("helm"),
        # Cluster DNS for the real node's pods (kubernetes.default.svc and Service names).
        ToolModule("coredns", cgo=False),
        # Runs inside the catalog image, which carries no C library for it.
        ToolModule("grpc-health-probe", cgo=False, renames=(("grpc-health-probe", "grpc_health_probe"),)),
        # Network faults between the operator and the API server in the fault tests and the soak.
        ToolModule("toxiproxy", renames=(("server", "toxiproxy"),)),
        # Checks and unit-tests the shipped alert rules; statically linked with the tags Prometheus's release uses.
        ToolModule("promtool", tags="netgo builtinassets", cgo=False),
        # Never built (its controllers are nested modules the module proxy does not serve): the source of the CRDs that
        # judge the Helm chart's cert-manager objects.
        ToolModule("cert-manager"),
    )
}

# Which module provides each binary a caller asks for.
BINARIES: dict[str, str] = {
    "etcd": "kubernetes",
    "kube-apiserver": "kubernetes",
    "kube-controller-manager": "kubernetes",
    "kube-scheduler": "kubernetes",
    "kubectl": "kubernetes",
    "kubelet": "kubernetes",
    "kube-proxy": "kubernetes",
    "kwok": "kwok",
    "opm": "opm",
    "operator-sdk": "operator-sdk",
    "scorecard-test": "scorecard-test",
    "olm": "olm",
    "catalog": "olm",
    "cpb": "olm-util",
    "package-server": "package-server",
    "helm": "helm",
    "grpc_health_probe": "grpc-health-probe",
    "coredns": "coredns",
    "toxiproxy": "toxiproxy",
    "promtool": "promtool",
}


def cache_root() -> Path:
    """Where built binaries live: outside the work tree so clean clones and CI reuse them."""
    if env := os.environ.get("NMO_TOOLS_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "node-maintenance-operator" / "tools"


def _go_version() -> str:
    return subprocess.run(["go", "env", "GOVERSION"], check=True, capture_output=True, text=True).stdout.strip()


def module_dir(module: ToolModule) -> Path:
    digest = hashlib.sha256()
    for part in ((module.path / "go.mod").read_bytes(), (module.path / "go.sum").read_bytes()):
        digest.update(part)
    digest.update(_go_version().encode())
    digest.update(module.ldflags.encode())
    digest.update(module.tags.encode())
    digest.update(b"cgo" if module.cgo else b"nocgo")
    return cache_root() / f"{module.name}-{digest.hexdigest()[:16]}"


def _log(message: str) -> None:
    print(f"[tools] {message}", file=sys.stderr, flush=True)


def ensure_module(module: ToolModule) -> Path:
    """Build the module's binaries unless a cached build with the same key exists; return their directory."""
    target = module_dir(module)
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Parallel test workers or commands may ask at once; one builds, the others wait for it.
    with open(target.parent / f".{module.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():
            return target
        return _build(module, target)


def _build(module: ToolModule, target: Path) -> Path:
    if shutil.which("go") is None:
        raise RuntimeError("the Go toolchain ('go') is needed to build the upstream tools; install Go 1.26 or newer")
    packages = module.packages()
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    _log(f"building {module.name}: {', '.join(p.rsplit('/', 1)[-1] for p in packages)} (a cold build takes minutes)")
    started = time.monotonic()
    env = {**os.environ, "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "1" if module.cgo else "0"}
    proc = subprocess.Popen(
        ["go", "build", "-v", "-trimpath", "-tags", module.tags, "-ldflags", module.ldflags, "-o", str(staging) + "/", *packages],
        cwd=module.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    tail: list[str] = []
    for compiled, line in enumerate(proc.stdout, start=1):
        tail = [*tail, line.rstrip()][-40:]
        if compiled % 200 == 0:
            _log(f"  {module.name}: {compiled} packages compiled, {time.monotonic() - started:.0f}s")
    if proc.wait() != 0:
        raise RuntimeError(f"go build of hack/tools/{module.name} failed:\n" + "\n".join(tail))
    for old, new in module.renames:
        (staging / old).rename(staging / new)
    (staging / ".complete").write_text(_go_version() + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    _log(f"built {module.name} in {time.monotonic() - started:.0f}s -> cache")
    return target


def module_source(tool_module: str, go_module: str) -> Path:
    """Where the Go module cache holds ``go_module`` at the version hack/tools/<tool_module> pins.

    Lets the harness use files an upstream project ships (such as KWOK's stage definitions) as they are.
    """
    path = MODULES[tool_module].path
    subprocess.run(["go", "mod", "download", go_module], cwd=path, check=True, capture_output=True)
    out = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", go_module], cwd=path, check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip())


def module_version(tool_module: str, go_module: str) -> str:
    """The version of ``go_module`` that hack/tools/<tool_module> pins, as go.mod names it (``v1.2.3``)."""
    out = subprocess.run(["go", "list", "-m", "-f", "{{.Version}}", go_module], cwd=MODULES[tool_module].path,
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def binary(name: str) -> Path:
    """Path of an upstream binary, building its module first if needed."""
    try:
        module = MODULES[BINARIES[name]]
    except KeyError:
        raise KeyError(f"unknown tool {name!r}; known: {', '.join(sorted(BINARIES))}") from None
    return ensure_module(module) / name


def ensure(names: list[str]) -> dict[str, Path]:
    return {name: binary(name) for name in names}
