"""The route OLM's webhook Services take to the operator process: simulated pod IPs are local addresses
inside the cluster's own network namespace, and only there."""

from __future__ import annotations

import subprocess

import pytest
from devcluster.cluster import KWOK_POD_CIDR, Cluster

pytestmark = pytest.mark.e2e


def _routes(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line.startswith("local ")]


def test_pod_range_is_local_inside_the_namespace_and_not_on_the_host(cluster: Cluster) -> None:
    inside = cluster.spawn("routes", ["ip", "route", "show", "table", "local"])
    inside.popen.wait(10)
    inside.stop()
    assert f"local {KWOK_POD_CIDR} dev lo scope host" in _routes(inside.log_path.read_text())
    host = subprocess.run(["ip", "route", "show", "table", "local"], capture_output=True, text=True, check=True).stdout
    assert not any(KWOK_POD_CIDR in route for route in _routes(host)), "the host's routes were changed"
