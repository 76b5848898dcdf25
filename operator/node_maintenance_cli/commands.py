"""The verbs of ``kubectl nm``; each returns the exit code, or raises CliError."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import time
from typing import Any

from node_maintenance import api
from node_maintenance.drain import nodes, pods

from . import plan, views
from .cluster import VERSION, Cluster
from .errors import CliError, Exit

POLL_SECONDS = 1.0
SETTLED = ("Succeeded", "Failed")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _for_node(cluster: Cluster, node: str) -> list[dict[str, Any]]:
    return [nm for nm in cluster.maintenances() if nm["spec"].get("nodeName") == node]


def maintenance_object(name: str, node: str, reason: str, selector: dict[str, Any] | None,
                       timeout: int | None, grace: int | None) -> dict[str, Any]:
    drain: dict[str, Any] = {}
    if selector is not None:
        drain["podSelector"] = selector
    if timeout is not None:
        drain["timeoutSeconds"] = timeout
    if grace is not None:
        drain["gracePeriodSeconds"] = grace
    spec: dict[str, Any] = {"nodeName": node, "reason": reason, **({"drain": drain} if drain else {})}
    return {"apiVersion": f"{api.GROUP}/{VERSION}", "kind": api.KIND, "metadata": {"name": name}, "spec": spec}


def start(cluster: Cluster, args: argparse.Namespace) -> int:
    cluster.node(args.node)
    taken = _for_node(cluster, args.node)
    if taken:
        names = ", ".join(nm["metadata"]["name"] for nm in taken)
        raise CliError(Exit.CONFLICT, f"node {args.node} is already in maintenance by NodeMaintenance {names}; "
                                      f"watch it with `kubectl nm status {args.node}` or end it with `kubectl nm stop {args.node}`")
    body = maintenance_object(args.name or args.node, args.node, args.reason, args.pod_selector, args.timeout, args.grace_period)
    created = cluster.create_maintenance(body)
    name = created["metadata"]["name"]
    out = views.console()
    if args.output == "table":
        views.say(out, f"NodeMaintenance {name} created: node {args.node} is cordoned and drained")
    if not args.wait:
        if args.output != "table":
            views.emit(created, args.output)
        return Exit.OK
    final = _wait(cluster, name, args.wait_timeout, out, quiet=args.output != "table", until_gone=False)
    if args.output != "table":
        views.emit(final, args.output)
    else:
        out.print(views.status_table([final], _now()))
    if _verdict(final):
        raise CliError(Exit.NOT_DRAINED, f"NodeMaintenance {name} Failed: {final['status'].get('lastError', '')}")
    return Exit.OK


def stop(cluster: Cluster, args: argparse.Namespace) -> int:
    found = _for_node(cluster, args.node)
    if not found:
        raise CliError(Exit.NOT_FOUND, f"node {args.node} is not in maintenance: no NodeMaintenance names it "
                                       "(`kubectl nm status` lists them)")
    names = [nm["metadata"]["name"] for nm in found]
    for name in names:
        cluster.delete_maintenance(name)
    out = views.console()
    if args.output == "table":
        views.say(out, f"NodeMaintenance {', '.join(names)} deleted: node {args.node} is given back once the operator has removed it")
    if args.wait:
        for name in names:
            _wait(cluster, name, args.wait_timeout, out, quiet=args.output != "table", until_gone=True)
        if args.output == "table":
            views.say(out, f"node {args.node} is out of maintenance")
    if args.output != "table":
        views.emit({"node": args.node, "deleted": names, "gone": bool(args.wait)}, args.output)
    return Exit.OK


def _shown(cluster: Cluster, node: str | None) -> list[dict[str, Any]]:
    items = _for_node(cluster, node) if node else cluster.maintenances()
    return sorted(items, key=lambda nm: nm["metadata"]["name"])


def status(cluster: Cluster, args: argparse.Namespace) -> int:
    items = _shown(cluster, args.node)
    if args.node and not items:
        raise CliError(Exit.NOT_FOUND, f"node {args.node} is not in maintenance: no NodeMaintenance names it "
                                       f"(start one with `kubectl nm start {args.node} --reason TEXT`)")
    out = views.console()

    def show(shown: list[dict[str, Any]]) -> None:
        if args.output == "table":
            out.print(views.status_table(shown, _now()))
        else:
            views.emit({"apiVersion": "v1", "kind": "List", "items": shown}, args.output)

    if not args.watch:
        show(items)
        return max((_verdict(nm) for nm in items), default=Exit.OK)
    redraw = args.output == "table" and out.is_terminal  # in place on a terminal; else once per change
    with views.live(out) if redraw else contextlib.nullcontext() as live:
        last: list[dict[str, Any]] | None = None
        while True:
            state = [views.summary(nm, _now()) | {"age": ""} for nm in items]
            if live is not None:
                live.update(views.status_table(items, _now()), refresh=True)
            elif state != last:
                show(items)
            last = state
            if all(nm["metadata"].get("deletionTimestamp") is None and (nm.get("status") or {}).get("phase") in SETTLED for nm in items):
                break
            time.sleep(POLL_SECONDS)
            items = _shown(cluster, args.node)
    return max((_verdict(nm) for nm in items), default=Exit.OK)


def show_plan(cluster: Cluster, args: argparse.Namespace) -> int:
    node = cluster.node(args.node)
    node_pods = cluster.pods_on(args.node)
    namespaces = sorted({p["metadata"]["namespace"] for p in node_pods})
    pdbs = [b for ns in namespaces for b in cluster.budgets_in(ns)]
    namespace_pods = [p for ns in namespaces for p in cluster.pods_in(ns)]
    daemonsets = cluster.daemonsets_exist(pods.daemonsets_to_read(node_pods))
    document = plan.build(args.node, node_pods, pdbs, namespace_pods, args.pod_selector, nodes.holder_of(node), daemonsets)
    if args.escalation is not None:
        maintenance = _escalating(cluster, args, nodes.holder_of(node))
        policy = plan.governing(node, cluster.policies())
        document["escalation"] = plan.escalation(maintenance, node_pods, pdbs, daemonsets, _now(), policy=policy)
    if args.output == "table":
        views.console().print(views.plan_view(document))
    else:
        views.emit(document, args.output)
    return Exit.OK if document["drainable"] else Exit.NOT_DRAINED


def _escalating(cluster: Cluster, args: argparse.Namespace, holder: str | None) -> dict[str, Any]:
    """The NodeMaintenance whose escalation ``plan --escalation`` shows: with steps given, a would-be drain of the node
    (its pod selector); without, the node's own (its holder, else the newest for the node)."""
    if args.escalation:
        body = maintenance_object(args.node, args.node, "", args.pod_selector, None, None)
        body["spec"]["drain"] = {**body["spec"].get("drain", {}), "escalation": args.escalation}
        return body
    mine = sorted(_for_node(cluster, args.node), key=lambda nm: (nm["metadata"]["name"] == holder, nm["metadata"].get("creationTimestamp") or ""))
    if not mine:
        raise CliError(Exit.NOT_FOUND, f"no NodeMaintenance for node {args.node}: give the steps of a would-be drain, "
                                       "e.g. --escalation 5m:DeletePods,10m:ForceDeletePods")
    return mine[-1]


def _verdict(nm: dict[str, Any]) -> int:
    return Exit.NOT_DRAINED if (nm.get("status") or {}).get("phase") == "Failed" else Exit.OK


def _wait(cluster: Cluster, name: str, timeout: int | None, out: views.Console, *, quiet: bool, until_gone: bool) -> dict[str, Any]:
    """Poll NodeMaintenance ``name`` until it settles (or is gone); the last object seen."""
    deadline = None if not timeout else time.monotonic() + timeout
    verb = "giving back" if until_gone else "draining"
    last: dict[str, Any] = {}
    with views.WaitView(out if not quiet else views.Console(stderr=True), f"NodeMaintenance {name}: {verb}") as view:
        while True:
            current = cluster.maintenance(name)
            if current is None:
                if until_gone:
                    return last
                raise CliError(Exit.NOT_FOUND, f"NodeMaintenance {name} was deleted while waiting for it to drain its node")
            last = current
            row = views.summary(current, _now())
            view.update(row["progress"], f"{row['phase']}, {row['pending']} pod(s) left" + (f": {row['lastError']}" if row["lastError"] else ""))
            if not until_gone and row["phase"] in SETTLED:
                return current
            if deadline is not None and time.monotonic() > deadline:
                raise CliError(Exit.NOT_DRAINED, f"NodeMaintenance {name} is still {row['phase']} after the wait timeout"
                               + (f" ({row['lastError']})" if row["lastError"] else "")
                               + f"; see what holds it with `kubectl nm plan {current['spec']['nodeName']}`, or wait longer")
            time.sleep(POLL_SECONDS)
