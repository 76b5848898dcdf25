"""The documentation works as written: every shell block marked runnable in docs/ and the README runs
against the local control plane with the operator, and the facts the pages restate match the code.

A block is runnable when its fence is opened with ```` ```sh runnable ````. The blocks of one page run
in order in one shell (`set -euo pipefail`), from the repository top, with kubectl and the package's
commands on PATH, KUBECONFIG set, and the nodes `node01` and `node02` the pages use.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from node_maintenance.runtime import metrics  # noqa: F401  registers the operator's metrics
from node_maintenance_cli.errors import Exit

from .helpers import NM, get

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
MARKER = "sh runnable"
DOC_NODES = ("node01", "node02")


def runnable_blocks(page: Path) -> list[tuple[int, str]]:
    """(line number, code) of each runnable block of ``page``."""
    text = page.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m["body"]) for m in FENCE.finditer(text) if m["info"].strip() == MARKER]


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


# ---------------------------------------------------------------- without a cluster
def test_runnable_marker_is_written_one_way_and_blocks_parse() -> None:
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            if "runnable" in m["info"]:
                assert m["info"].strip() == MARKER, f"{_name(page)}: write the fence as ```{MARKER}, not ```{m['info']}"
        for line, code in runnable_blocks(page):
            checked = subprocess.run(["bash", "-n"], input=code, capture_output=True, text=True)
            assert checked.returncode == 0, f"{_name(page)}:{line}: {checked.stderr}"
    assert sum(len(runnable_blocks(p)) for p in PAGES) >= 10


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_pages_resolve() -> None:
    for page in PAGES:
        text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", page.read_text()))  # links, not code that looks like one
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            assert resolved.exists(), f"{_name(page)} links to missing {target}"
            if anchor:
                headings = re.findall(r"^#+ (.+)$", FENCE.sub("", resolved.read_text()), re.M)
                assert anchor in {_anchor(h) for h in headings}, f"{_name(page)} links to missing heading {target}"


def test_metrics_page_lists_exactly_the_operator_metrics() -> None:
    ours = {m.name for m in REGISTRY.collect() if m.name.startswith("node_maintenance_")}
    documented = set(re.findall(r"^\| `(node_maintenance_\w+)` \|", (ROOT / "docs/metrics.md").read_text(), re.M))
    # prometheus_client names a counter's family without its _total suffix
    assert {name.removesuffix("_total") for name in documented} == ours


def test_plugin_page_documents_every_exit_code() -> None:
    rows = re.findall(r"^\| (\d) \| (.+) \|$", (ROOT / "docs/plugin.md").read_text(), re.M)
    assert [int(code) for code, _ in rows] == [int(code) for code in Exit]


# ---------------------------------------------------------------- against the local cluster
RUNNABLE = [page for page in PAGES if runnable_blocks(page)]


@pytest.fixture(scope="module")
def doc_nodes(cluster: Cluster) -> Iterator[tuple[str, ...]]:
    for name in DOC_NODES:
        cluster.create_kwok_node(name)
    for name in DOC_NODES:
        cluster.wait_node_ready(name)
    yield DOC_NODES
    cluster.kubectl("delete", "node", *DOC_NODES, "--wait=false", "--ignore-not-found", check=False)


def _namespaces(cluster: Cluster) -> set[str]:
    return {ns["metadata"]["name"] for ns in (get(cluster, "namespaces") or {"items": []})["items"]}


def _script(page: Path) -> str:
    parts = ["set -euo pipefail"]
    for line, code in runnable_blocks(page):
        parts += [f"echo '>>> {_name(page)}:{line}' >&2", code]
    return "\n".join(parts) + "\n"


@pytest.mark.e2e
@pytest.mark.parametrize("page", RUNNABLE, ids=[_name(p) for p in RUNNABLE])
def test_runnable_blocks_run(cluster: Cluster, operator: OperatorProcess, doc_nodes: tuple[str, ...], page: Path) -> None:
    before = _namespaces(cluster)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(cluster.bin["kubectl"].parent), str(Path(sys.executable).parent), os.environ["PATH"]]),
        "KUBECONFIG": str(cluster.kubeconfig),
    }
    try:
        ran = subprocess.run(["bash", "-c", _script(page)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)
        assert ran.returncode == 0, (
            f"{_name(page)}: a runnable block failed (exit {ran.returncode}); the last '>>>' line names it\n"
            f"--- stdout\n{ran.stdout[-4000:]}\n--- stderr\n{ran.stderr[-4000:]}"
        )
        # A page leaves the cluster as it found it: no maintenance left, the nodes given back.
        left = [nm["metadata"]["name"] for nm in (get(cluster, NM) or {"items": []})["items"] if nm["spec"]["nodeName"] in doc_nodes]
        assert not left, f"{_name(page)} leaves NodeMaintenances behind: {left}"
        for name in doc_nodes:
            spec = (get(cluster, "node", name) or {}).get("spec", {})
            assert not spec.get("unschedulable") and not spec.get("taints"), f"{_name(page)} leaves node {name} cordoned or tainted"
    finally:
        for nm in (get(cluster, NM) or {"items": []})["items"]:
            if nm["spec"]["nodeName"] in doc_nodes:
                cluster.kubectl("delete", NM, nm["metadata"]["name"], "--ignore-not-found", "--timeout=60s")
        for namespace in _namespaces(cluster) - before:
            cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
