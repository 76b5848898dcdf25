"""Run the benchmark: ``python -m bench`` (everything) or ``python -m bench --smoke`` (one small round)."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import resource
import statistics
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from devcluster.operator import OperatorProcess, grant_csv_permissions, point_conversion_at
from node_maintenance.api import CRD_NAME
from node_maintenance.api.paths import nm_path
from node_maintenance.client.async_http import AsyncKube
from node_maintenance.runtime.leader import LEASE_NAME
from node_maintenance_packaging.clusterserviceversion import NAMESPACE

from . import drains, fleet, report, scale, timeline
from .cluster import CONTROL_PLANE_FLAGS, KUBECTL_USER, OPERATOR_USER, AuditCounter, BenchCluster
from .spy import hottest, profiling
from .workload import SETTLE_SECONDS, Shape, node_pair, settled, until

ROOT = Path(__file__).resolve().parents[1]
CRD_FILE = ROOT / "bundle" / "manifests" / "nodemaintenance.kubevirt.io_nodemaintenances.yaml"
# The parts besides the single-node rounds, in the order they run.
PARTS = ("conversion", "timeline", "no_budgets", "curve", "twenty_nodes", "scale", "fleet", "fleet_at_limit")
# What --smoke changes: one round of 30 pods, the timeline of one such drain, and a fleet of 200 queued
# maintenances, ten at once, on nodes of a pod or none. Flags given with --smoke still win.
SMOKE = {"rounds": 1, "grace_rounds": 0, "pods": 30, "parts": "timeline,fleet", "scale_nodes": 200, "scale_pods": 100,
         "fleet_parallel": 10, "fleet_first": 25}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--smoke", action="store_true", help="a small round: checks the report is written, not any speed")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"which parts run besides the single-node rounds ({', '.join(PARTS)})")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--grace-rounds", type=int, default=1, help="rounds of the 30 s grace-period variant")
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--many", type=int, default=20, help="nodes drained at once, by the operator and by as many kubectl drains")
    parser.add_argument("--scale-nodes", type=int, default=1000, help="nodes of the scale case, and of the fleet")
    parser.add_argument("--scale-pods", type=int, default=30000)
    parser.add_argument("--fleet-parallel", type=int, default=20, help="the fleet policy's maxParallel")
    parser.add_argument("--fleet-first", type=int, default=100, help="the fleet is timed until this many nodes are drained")
    parser.add_argument("--limit-nodes", type=int, default=5000, help="nodes of the fleet at Kubernetes' own limit")
    parser.add_argument("--limit-pods", type=int, default=30000, help="pods spread over the nodes of the fleet at the limit")
    parser.add_argument("--limit-parallel", type=int, default=50, help="the maxParallel of the fleet at the limit")
    parser.add_argument("--limit-first", type=int, default=500, help="the fleet at the limit is timed until this many nodes are drained")
    parser.add_argument("--curve", default="10,30,110,250", help="pods per node of the scaling curve")
    parser.add_argument("--profile", action=argparse.BooleanOptionalAction, default=True,
                        help="profile the operator with py-spy during the slowest case")
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**SMOKE)
        args = parser.parse_args(argv)
    unknown = set(args.parts.split(",")) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    return args


class Bench:
    def __init__(self, cluster: BenchCluster, api: AsyncKube, operator: OperatorProcess, kubectl_config: Path) -> None:
        self.cluster, self.api, self.operator, self.kubectl_config = cluster, api, operator, kubectl_config
        self.audit = AuditCounter(cluster.audit_log)
        self.tags = 0
        self.cpu: list[float] = []  # the operator's CPU seconds in each single-node drain

    def tag(self, kind: str) -> str:
        self.tags += 1
        return f"{kind}-{self.tags}"

    async def pair(self, shape: Shape) -> tuple[str, str]:
        """Two identical loaded nodes (each with its spare), set up together."""
        (a, _), (b, _) = await asyncio.gather(node_pair(self.cluster, self.api, self.tag("k"), shape),
                                              node_pair(self.cluster, self.api, self.tag("o"), shape))
        return a, b

    async def measured(self, user: str, drain: Awaitable[float]) -> tuple[float, Counter[str]]:
        await asyncio.sleep(1)  # let the previous case's stragglers reach the audit log
        self.audit.mark()
        seconds = await drain
        await asyncio.sleep(1)
        return seconds, self.audit.since_mark(user)

    async def round(self, shape: Shape, operator_first: bool) -> dict[str, Any]:
        k_node, o_node = await self.pair(shape)
        cases: list[tuple[str, str, Callable[[], Awaitable[float]]]] = [
            ("operator", OPERATOR_USER, lambda: self.timed_cpu(drains.with_operator(self.api, [o_node]))),
            ("kubectl", KUBECTL_USER, lambda: drains.with_kubectl(self.cluster, self.kubectl_config, k_node))]
        if not operator_first:
            cases.reverse()
        result: dict[str, Any] = {"first": cases[0][0]}
        for name, user, run in cases:
            result[name], result[f"{name}_requests"] = await self.measured(user, run())
        await self.release(o_node)
        return result

    async def timed_cpu(self, drain: Awaitable[float]) -> float:
        """``drain``'s seconds; the operator's CPU seconds meanwhile are added to ``self.cpu``."""
        cpu = self.operator_cpu()
        seconds = await drain
        self.cpu.append(self.operator_cpu() - cpu)
        return seconds

    async def release(self, node: str) -> None:
        """Delete a measured NodeMaintenance, so its watches do not run into the next measurement."""
        await self.api.request("DELETE", nm_path(node))

    async def single(self, rounds: int, grace_rounds: int, shape: Shape) -> dict[str, Any]:
        done = []
        for i in range(rounds):
            done.append(await self.round(shape, operator_first=i % 2 == 0))
            print(f"round {i + 1}: kubectl {done[-1]['kubectl']:.2f}s operator {done[-1]['operator']:.2f}s", flush=True)
        grace = [await self.round(Shape(**{**shape.__dict__, "grace": 30}), operator_first=i % 2 == 0) for i in range(grace_rounds)]
        k = statistics.median(r["kubectl"] for r in done)
        o = statistics.median(r["operator"] for r in done)
        result = {"pods": shape.drained, "rounds": _plain(done), "grace_30s": _plain(grace),
                  "kubectl_median": round(k, 2), "operator_median": round(o, 2), "ratio": round(o / k, 2)}
        if grace:
            gk, go = statistics.median(r["kubectl"] for r in grace), statistics.median(r["operator"] for r in grace)
            result["grace_30s_ratio"] = round(go / gk, 2)
        result["operator_cpu_ms_per_pod"] = round(1000 * statistics.median(self.cpu[:len(done)]) / shape.drained, 2)
        self.requests: dict[str, Counter[str]] = {who: sum((r[f"{who}_requests"] for r in done), Counter()) for who in ("operator", "kubectl")}
        self.drained = shape.drained * len(done)
        return result

    def api_cost(self) -> dict[str, Any]:
        out = {}
        for who, counts in self.requests.items():
            drain_counts = {k: v for k, v in counts.items() if "leases" not in k}
            out[who] = {"per_pod": {k: round(v / self.drained, 3) for k, v in sorted(drain_counts.items())},
                        "per_pod_total": round(sum(drain_counts.values()) / self.drained, 3),
                        "lease_renewals_per_pod": round(sum(v for k, v in counts.items() if "leases" in k) / self.drained, 3)}
        return out

    async def wave(self, shape: Shape) -> float:
        node, _ = await node_pair(self.cluster, self.api, self.tag("w"), shape)
        return await drains.budget_wave(self.api, node, node, shape.deployments)

    async def no_budgets(self, pods: int) -> dict[str, Any]:
        shape = Shape(deployments=0, statefulset=0, bare=pods)
        node, _ = await node_pair(self.cluster, self.api, self.tag("b"), shape)
        seconds, counts = await self.measured(OPERATOR_USER, drains.with_operator(self.api, [node]))
        await self.release(node)
        drain_counts = {k: v for k, v in counts.items() if "leases" not in k}
        return {"pods": pods, "seconds": round(seconds, 2), "per_pod_total": round(sum(drain_counts.values()) / pods, 3),
                "per_pod": {k: round(v / pods, 3) for k, v in sorted(drain_counts.items())}}

    @property
    def pid(self) -> int:
        """The operator's process (a new one after each restart)."""
        assert self.operator.process is not None
        return self.operator.process.pid

    def operator_cpu(self) -> float:
        return scale.cpu_seconds(self.pid)

    async def many(self, count: int, shape: Shape, stacks: Path | None) -> dict[str, Any]:
        """``count`` identical nodes drained at once by the operator, ``count`` more by as many `kubectl drain`s at
        once, and ``count`` more evicted as fast as their budgets allow (the control plane's pace, which no drain
        beats), in the same run (py-spy samples the operator's third into ``stacks``)."""
        started = time.monotonic()
        pairs = await asyncio.gather(*(node_pair(self.cluster, self.api, self.tag("m"), shape) for _ in range(3 * count)))
        setup = time.monotonic() - started
        by_kubectl, by_budgets, by_operator = pairs[:count], pairs[count:2 * count], pairs[2 * count:]
        # kubectl's third goes first, the operator's last, each once the nodes before have settled: whatever the
        # controllers still do after such a drain then counts against the operator, never for it.
        kubectl = await self.drained_at_once(by_kubectl, shape, self.kubectl_drains, _children_cpu)
        settle = await self.settle(by_kubectl, shape)
        pace = await self.drained_at_once(by_budgets, shape, lambda nodes: drains.as_budgets_allow(self.api, nodes), time.process_time)
        await self.settle(by_budgets, shape)
        with profiling(self.pid, stacks):
            operator = await self.drained_at_once(by_operator, shape, lambda nodes: drains.with_operator(self.api, nodes), self.operator_cpu)
        await self.settle(by_operator, shape)  # the parts after this one start from rest as well
        return {"nodes": count, "setup_seconds": round(setup, 1), "first": "kubectl", "settle_seconds": round(settle, 1),
                "kubectl": kubectl, "pace": pace, "operator": operator, "ratio": round(operator["seconds"] / kubectl["seconds"], 2),
                "operator_vs_pace": round(operator["seconds"] / pace["seconds"], 2)}

    async def settle(self, pairs: list[tuple[str, str]], shape: Shape) -> float:
        """Seconds until the workloads of drained nodes are at rest: every Deployment's pods Running (the replacements)
        and every budget allowing an eviction again. Their StatefulSets are deleted first: after many drains at once,
        the harness's KWOK deletes each StatefulSet pod recreated under the same name again, and again, without end."""
        started = time.monotonic()
        if shape.statefulset:
            await asyncio.gather(*(self.api.request("DELETE", f"/apis/apps/v1/namespaces/{node}/statefulsets/db") for node, _ in pairs))
        # The Deployments' pods, and the DaemonSet's on the drained node.
        running = shape.deployments * shape.replicas + 1
        await until(lambda: _every(settled(self.api, node, running) for node, _ in pairs), "the drained nodes' workloads at rest", SETTLE_SECONDS)
        return time.monotonic() - started

    async def drained_at_once(self, pairs: list[tuple[str, str]], shape: Shape, drain: Callable[[list[str]], Awaitable[float]],
                              cpu: Callable[[], float]) -> dict[str, Any]:
        """One drainer's nodes drained at once: seconds, how fast the controllers replaced the evicted pods (the pace
        every drain of the nodes waits on) and the drainer's CPU per evicted pod."""
        used = cpu()
        seconds = await drain([node for node, _ in pairs])
        used = cpu() - used
        created = []
        for node, spare in pairs:
            listing = await self.api.request("GET", f"/api/v1/namespaces/{node}/pods", query={"fieldSelector": f"spec.nodeName={spare}"})
            created += [p["metadata"]["creationTimestamp"] for p in listing["items"]]
        stamps = sorted(time.mktime(time.strptime(c, "%Y-%m-%dT%H:%M:%SZ")) for c in created)
        rate = len(stamps) / max(1.0, stamps[-1] - stamps[0]) if stamps else None
        return {"seconds": round(seconds, 2), "replacements": len(stamps), "replacements_per_second": round(rate, 1) if rate else None,
                "cpu_seconds": round(used, 2), "cpu_ms_per_pod": round(1000 * used / (len(pairs) * shape.drained), 2)}

    async def kubectl_drains(self, nodes: list[str]) -> float:
        return await drains.many_with_kubectl(self.cluster, self.kubectl_config, nodes)

    async def timeline(self, shape: Shape, limit: float) -> dict[str, Any]:
        """One drain of the single-node shape, wave by wave (``bench.timeline``; the operator logs at DEBUG)."""
        node, _ = await node_pair(self.cluster, self.api, self.tag("t"), shape)
        audit = AuditCounter(self.cluster.audit_log)
        audit.mark()
        created = time.time()  # the clock of the audit log and of the operator's log lines
        seconds = await drains.with_operator(self.api, [node])
        await asyncio.sleep(1)  # the last events reach the audit log
        await self.release(node)
        assert self.operator.process is not None
        return {"pods": shape.drained, **timeline.analyse(audit.events(), timeline.seen(self.operator.process.log_path), node,
                                                           [f"web-{i}" for i in range(shape.deployments)], created, seconds, limit)}

    async def curve(self, sizes: list[int]) -> dict[str, Any]:
        points = []
        for pods in sizes:
            node, _ = await node_pair(self.cluster, self.api, self.tag("c"), Shape.of_size(pods))
            points.append({"pods": pods, "seconds": round(await drains.with_operator(self.api, [node]), 2)})
            await self.release(node)
            print(f"curve: {pods} pods {points[-1]['seconds']}s", flush=True)
        per_pod = [p["seconds"] / p["pods"] for p in points]
        return {"points": points, "linearity": round(max(b / a for a, b in itertools.pairwise(per_pod)), 2) if len(points) > 1 else None}


async def _every(checks: Iterator[Awaitable[bool]]) -> bool:
    return all(await asyncio.gather(*checks))


def _children_cpu() -> float:
    """CPU seconds of this process's children that have ended (every `kubectl drain` once it has)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _plain(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: (round(v, 2) if isinstance(v, float) else dict(v) if isinstance(v, Counter) else v) for k, v in r.items()} for r in rounds]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    parts = args.parts.split(",")
    shape = Shape.of_size(args.pods)
    result: dict[str, Any] = {"smoke": args.smoke, "parts": parts, "cpus": os.cpu_count(), "load_average_before": round(os.getloadavg()[0], 1),
                              "control_plane_flags": {k: list(v) for k, v in CONTROL_PLANE_FLAGS.items()}}
    with tempfile.TemporaryDirectory(prefix="nmo-bench-") as scratch:
        with BenchCluster() as cluster:
            api = cluster.admin()
            operator_config = install(cluster)
            kubectl_config = cluster.kubectl_drain_kubeconfig()
            if "conversion" in parts:  # first, by a replica that serves webhooks only (another holds the Lease)
                webhook = OperatorProcess(cluster, Path(scratch) / "webhook", operator_config, identity="webhook-only", in_pod=True)
                cluster.kubectl("apply", "-f", "-", input=_held_lease())
                assert webhook.ca_pem is not None
                point_conversion_at(cluster, webhook.webhook_url + "/convert", webhook.ca_pem)
                webhook.start()
                result["conversion"] = await scale.conversion(cluster, api, webhook, 1000)
                webhook.stop()
                cluster.kubectl("delete", "lease", LEASE_NAME, "-n", NAMESPACE)
                print(f"conversion: {result['conversion']}", flush=True)
                result.setdefault("load_average_after", {})["conversion"] = round(os.getloadavg()[0], 1)
            # As in a pod (no kubeconfig): what the operator costs is then what the image costs.
            operator = OperatorProcess(cluster, Path(scratch) / "operator", operator_config, in_pod=True)
            assert operator.ca_pem is not None
            point_conversion_at(cluster, operator.webhook_url + "/convert", operator.ca_pem)
            # The timeline reads the budget watch's DEBUG lines; everything else measures the operator at its usual level.
            operator.start(*(["--log-level=debug"] if "timeline" in parts else []))
            bench = Bench(cluster, api, operator, kubectl_config)
            wave = await bench.wave(shape)
            # No drain beats one wave per pod of a budget, plus the grace period of the last pods.
            limit = wave * shape.replicas + shape.grace
            if "timeline" in parts:
                await part(result, "timeline", bench.timeline(shape, limit), args.out)
                operator.stop()
                operator.start()
            result["single_node"] = await bench.single(args.rounds, args.grace_rounds, shape)
            result["single_node"].update(wave_seconds=round(wave, 2), waves=shape.replicas, limit_seconds=round(limit, 2),
                                         operator_vs_limit=round(result["single_node"]["operator_median"] / limit, 2))
            result["api_cost"] = bench.api_cost()
            result.setdefault("load_average_after", {})["single_node"] = round(os.getloadavg()[0], 1)
            report.write(result, args.out)
            if "no_budgets" in parts:
                await part(result, "no_budgets", bench.no_budgets(shape.drained), args.out)
            # Every single-node drain before the many nodes: their thousands of replacements keep the
            # controllers busy for a while after the last drain ends (a 10-pod drain took 30 s behind them).
            if "curve" in parts:
                await part(result, "curve", bench.curve([int(n) for n in args.curve.split(",")]), args.out)
            if "twenty_nodes" in parts:
                await part(result, "twenty_nodes", many_profiled(bench, args, result), args.out)
            # The fleet last, on the scale case's nodes and pods (its NodeMaintenances are not waited out).
            names = scale.node_names(args.scale_nodes)
            if "scale" in parts:
                await part(result, "scale", scale.many_nodes(cluster, api, operator, names, args.scale_pods, 10, 15), args.out)
            if "fleet" in parts:
                await part(result, "fleet", fleet_on(cluster, api, operator, names, args.fleet_parallel, args.fleet_first, args.out,
                                                     args.profile, pods=None if "scale" in parts else args.scale_pods), args.out)
            operator.stop()
            await api.close()
        # Then at Kubernetes' own limit, on more nodes and the same number of pods, on a control plane of its own.
        if "fleet_at_limit" in parts:
            await part(result, "fleet_at_limit", at_limit(args, Path(scratch) / "at-limit"), args.out)
    result["wall_seconds"] = round(time.monotonic() - started, 1)
    return result


def install(cluster: BenchCluster) -> Path:
    """The NodeMaintenance CRD, and the operator's permissions as its CSV grants them: its kubeconfig."""
    cluster.kubectl("apply", "--server-side", "-f", str(CRD_FILE))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}")
    return grant_csv_permissions(cluster, NAMESPACE)


async def at_limit(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """The fleet at Kubernetes' own limit, on a control plane and an operator of its own: an earlier part's 30,000
    pods, deleted first, took longer than this part's whole setup, and its operator starts afresh."""
    with BenchCluster() as cluster:
        api = cluster.admin()
        try:
            operator = OperatorProcess(cluster, scratch, install(cluster), in_pod=True)
            assert operator.ca_pem is not None
            point_conversion_at(cluster, operator.webhook_url + "/convert", operator.ca_pem)
            operator.start()
            try:
                return await fleet_on(cluster, api, operator, scale.node_names(args.limit_nodes), args.limit_parallel, args.limit_first,
                                      args.out, args.profile, pods=args.limit_pods)
            finally:
                operator.stop()
        finally:
            await api.close()


async def part(result: dict[str, Any], name: str, measured: Any, out: Path) -> None:
    """One later part of the run: a failure is reported in its place, and the report is written after
    each part, so what was measured is kept whatever happens later. A wait that timed out (``until``'s
    SystemExit) is such a failure; an interrupt is not. One raised while cleaning up after another names that other too:
    it is the cause."""
    try:
        result[name] = await measured
    except (Exception, SystemExit) as error:
        where = traceback.format_exc(limit=-4).replace(f"{ROOT}/", "").splitlines()[1:-1]  # the project's paths, not the machine's
        result[name] = {"error": f"{type(error).__name__}: {error}", "where": where}
        if (cause := error.__context__) is not None:
            result[name]["while_handling"] = f"{type(cause).__name__}: {cause}"
    result.setdefault("load_average_after", {})[name] = round(os.getloadavg()[0], 1)  # the machine may be shared
    print(f"{name}: {result[name]}", flush=True)
    report.write(result, out)


async def many_profiled(bench: Bench, args: argparse.Namespace, result: dict[str, Any]) -> dict[str, Any]:
    """Many nodes at once (the slowest case), with py-spy sampling the operator's drain of them."""
    stacks = args.out / "profile-many-nodes.txt" if args.profile else None
    args.out.mkdir(parents=True, exist_ok=True)
    many = await bench.many(args.many, Shape.of_size(args.pods), stacks)
    if stacks:
        result["profile"] = {"case": f"{args.many} nodes at once", "stacks": stacks.name, "hottest": hottest(stacks)}
    return {**many, "ratio_to_single": round(many["operator"]["seconds"] / result["single_node"]["operator_median"], 2)}


async def fleet_on(cluster: BenchCluster, api: AsyncKube, operator: OperatorProcess, names: list[str], parallel: int, first: int,
                   out: Path, profile: bool, pods: int | None) -> dict[str, Any]:
    """A fleet on the nodes ``names`` and, unless ``pods`` is None (the scale case's are used), that many pods spread
    over them afresh; py-spy samples the operator while its first nodes drain, into a profile named by its size."""
    if pods is not None:
        await scale.populate(api, names, pods)
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    stacks = out / f"profile-fleet-{len(names)}.txt" if profile else None
    measured = await fleet.Fleet(cluster, api, operator, names, parallel, first, stacks).run()
    if stacks:
        measured["profile"] = {"case": f"the fleet's first {first} nodes", "stacks": stacks.name, "hottest": hottest(stacks)}
    return measured


def _held_lease() -> str:
    import json

    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    return json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": LEASE_NAME, "namespace": NAMESPACE},
                       "spec": {"holderIdentity": "bench-elsewhere", "leaseDurationSeconds": 3600, "renewTime": now, "acquireTime": now}})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = asyncio.run(run(args))
    report.write(result, args.out)
    problems = report.check(args.out)
    print((args.out / "report.txt").read_text())
    if problems:
        print("bench: the report is not well formed:\n" + "\n".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
