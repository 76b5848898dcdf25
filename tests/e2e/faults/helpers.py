"""A drain of nodes under budgets with a fault injected in the middle, and the checks every fault test makes."""

from __future__ import annotations

import datetime
import json
import re
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from devcluster.toxiproxy import Proxy
from node_maintenance.runtime.leader import LEASE_NAME
from node_maintenance_packaging.clusterserviceversion import NAMESPACE
from soak.chaos import Api, BudgetMonitor, Checker, Tally, Workload, build_workload, open_spares

from ..helpers import eventually


def poke(admin: Api, kinds: tuple[str, ...], namespace: str, annotation: str) -> None:
    """Annotate every object of ``kinds`` ("budgets", "pods") in ``namespace``, from this process: an event on each
    watch of them at once, however loaded the machine (a kubectl would take seconds to start). Pods the drain evicts
    meanwhile are gone before their turn, which is no failure."""
    key, value = annotation.split("=", 1)
    body = {"metadata": {"annotations": {key: value}}}
    kinds_of = {"budgets": (admin.budgets, admin.policy.patch_namespaced_pod_disruption_budget),
                "pods": (admin.pods, admin.core.patch_namespaced_pod)}
    for kind in kinds:
        listed, patch = kinds_of[kind]
        for obj in listed(namespace):
            try:
                patch(obj["metadata"]["name"], namespace, body, _request_timeout=10)
            except ApiException as error:
                if error.status != 404:
                    raise


def lease_renewed_after(admin: Api, operator: OperatorProcess, instant: datetime.datetime) -> bool:
    """Whether ``operator`` holds its leader Lease and has renewed it after ``instant`` (read past any proxy)."""
    spec = client.CoordinationV1Api(admin.client).read_namespaced_lease(LEASE_NAME, NAMESPACE, _request_timeout=10).spec
    return spec is not None and spec.holder_identity == operator.identity and spec.renew_time is not None and spec.renew_time > instant


@dataclass
class Drain:
    workload: Workload
    monitor: BudgetMonitor
    seconds: float


def drain_with_fault(cluster: Cluster, admin: Api, namespace: str, run_id: str, tally: Tally,
                     fault: Callable[[Callable[[], None]], None], *, nodes: int = 3, timeout: float = 240) -> Drain:
    """Put ``nodes`` nodes carrying budgeted pods into maintenance and return once every maintenance Succeeded.

    The spare nodes start cordoned, so the drain holds after one eviction per budget; ``fault`` is
    called then, with a function that uncordons the spares (the drain goes on) for it to call when it
    wants. The budgets are watched all along."""
    workload = build_workload(cluster, admin, namespace, run_id, nodes=nodes, spares=2, on_targets_only=True)
    started = time.monotonic()
    with BudgetMonitor(admin, namespace, tally) as monitor:
        for node in workload.nodes:
            admin.create_maintenance(f"{node}-nm", node)
        eventually(lambda: _waiting_for_room(admin, workload), "the drain holding on the budgets, replacements pending", timeout=60)
        fault(lambda: open_spares(cluster, admin, workload))
        over = time.monotonic() - started
        eventually(lambda: _succeeded(admin, workload), f"the {nodes} maintenances Succeeded", timeout=timeout, interval=1)
        # In the test report: when each budget allowed what, from the drains' start.
        print(f"fault over at {over:.1f}s; budgets allowed:", [(round(at - started, 1), allowed) for at, allowed in monitor.allowed])
        left = Checker(admin, workload, tally).settled(60)
    assert not left, left
    assert monitor.samples > 10, f"the budgets were looked at only {monitor.samples} times"
    return Drain(workload, monitor, time.monotonic() - started)


def _waiting_for_room(admin: Api, workload: Workload) -> bool:
    return any(p.get("status", {}).get("phase") == "Pending" for p in admin.pods(workload.namespace))


def _succeeded(admin: Api, workload: Workload) -> bool:
    try:
        mine = [m for m in admin.maintenances() if m["spec"]["nodeName"] in workload.nodes]
    except Exception:  # the API server may be restarting
        return False
    return len(mine) == len(workload.nodes) and all((m.get("status") or {}).get("phase") == "Succeeded" for m in mine)


def give_back(admin: Api, workload: Workload, tally: Tally) -> None:
    """Delete the maintenances; every node must return to how it was before."""
    for node in workload.nodes:
        admin.delete_maintenance(f"{node}-nm")
    left = Checker(admin, workload, tally).settled(60)
    assert not left, left


def log_lines_since(operator: OperatorProcess, offset: int, needle: str) -> list[str]:
    return [line for line in operator.logs()[offset:].splitlines() if needle in line]


WATCH_SAID = re.compile(r"watch of (\S+) (failed|is current again)")


def watches_since(operator: OperatorProcess, offset: int) -> dict[str, str]:
    """What the operator's list+watches (``client.watch``) last said of each since ``offset``, by the path and
    selection each watches: "failed" or "is current again"."""
    said: dict[str, str] = {}
    for line in operator.logs()[offset:].splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line still being written, or not the operator's own
            continue
        if record.get("logger") == "node_maintenance.client.watch" and (found := WATCH_SAID.match(record.get("msg", ""))):
            said[found[1]] = found[2]
    return said


def request_seconds(proxy: Proxy, cluster: Cluster) -> float:
    """How long one TLS handshake and GET /version through the proxy take."""
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as raw, context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        while tls.recv(65536):
            pass
    return time.monotonic() - started


def refused(proxy: Proxy) -> bool:
    """Whether the proxy refuses connections (its link blacked out)."""
    try:
        socket.create_connection(("127.0.0.1", proxy.port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False
