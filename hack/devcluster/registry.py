"""A real OCI registry on 127.0.0.1 (Debian's docker-registry), storing into a temporary directory."""

from __future__ import annotations

import itertools
import shutil
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

import yaml

from .processes import Process, free_port
from .waiting import polls


class Registry:
    """Context manager: ``with Registry() as registry: registry.host`` is ``127.0.0.1:<port>``."""

    def __init__(self, *, setup: Callable[[], None] | None = None) -> None:
        """``setup`` runs in the registry process before exec (to start it in a cluster's namespace)."""
        self.workdir = Path(tempfile.mkdtemp(prefix="nmo-registry-"))
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.process: Process | None = None
        self._setup = setup

    def __enter__(self) -> Registry:
        binary = shutil.which("docker-registry")
        if binary is None:
            raise RuntimeError("docker-registry is not installed: run `make system-deps` (Debian package docker-registry)")
        config = {
            "version": 0.1,
            "log": {"level": "warn"},
            "storage": {"filesystem": {"rootdirectory": str(self.workdir / "data")}, "delete": {"enabled": True}},
            "http": {"addr": self.host},
        }
        (self.workdir / "config.yml").write_text(yaml.safe_dump(config))
        self.process = Process("registry", [binary, "serve", str(self.workdir / "config.yml")], self.workdir, setup=self._setup)
        for _ in polls(30, itertools.repeat(0.1)):
            try:
                with urllib.request.urlopen(f"http://{self.host}/v2/", timeout=1) as response:
                    if response.status == 200:
                        return self
            except OSError:  # not listening yet, or too busy to answer within the second
                pass
        self.__exit__()
        raise RuntimeError("the local registry did not answer /v2/ within 30 s")

    def __exit__(self, *exc: object) -> None:
        if self.process:
            self.process.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
