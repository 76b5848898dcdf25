"""``make soak``: NodeMaintenances created and deleted at random on ten nodes for ``--minutes``, while the
operator is SIGKILLed every few seconds (the first half) and its link to the API server meets latency,
resets and blackouts through Toxiproxy (all along). The invariants are checked after every step.

The second half runs one operator process without kills, so its memory is compared (``soak.memory``)
from when it has warmed up to the end. Writes report.json and report.txt; exits 1 on any invariant
violation, a maintenance left unfinished, or memory at the end more than 10% above the start; the
operator's logs go next to the report.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rich.console import Console
from rich.table import Table

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess, grant_csv_permissions
from devcluster.toxiproxy import Toxiproxy
from node_maintenance.api import CRD_NAME
from node_maintenance_packaging.clusterserviceversion import NAMESPACE

from .chaos import Api, BudgetMonitor, Loop, Supervisor, Tally, build_workload, kills_asked
from .memory import MemorySampler, comparison_seconds, growth, warm_up_seconds

ROOT = Path(__file__).resolve().parent.parent
CRD_FILE = ROOT / "bundle" / "manifests" / "nodemaintenance.kubevirt.io_nodemaintenances.yaml"
MEMORY_BAR = 1.10
SETTLE_SECONDS = 180


def soak(minutes: float, seed: int, workdir: Path, logs: Path) -> dict[str, Any]:
    """Run the soak on a fresh local control plane, the operator's logs in ``logs``; return the report."""
    tally = Tally()
    seconds = minutes * 60
    with Cluster() as cluster, Toxiproxy(cluster.logs_dir) as toxiproxy:
        cluster.kubectl("apply", "--server-side", "-f", str(CRD_FILE))
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
        proxy = toxiproxy.proxy("apiserver", urlsplit(cluster.server).netloc)
        kubeconfig = cluster.kubeconfig_via(grant_csv_permissions(cluster, NAMESPACE), workdir / "proxied.kubeconfig", f"https://{proxy.listen}")
        operator = OperatorProcess(cluster, logs, kubeconfig, identity="soak")
        admin = Api(cluster)
        cluster.kubectl("create", "namespace", "soak")
        workload = build_workload(cluster, admin, "soak", "soak", nodes=10, spares=2, cordoned=2, scale=2)
        operator.start()
        with Supervisor(operator, tally) as supervisor, BudgetMonitor(admin, "soak", tally) as monitor:
            loop = Loop(admin, workload, supervisor, tally, random.Random(seed), proxy=proxy, prefix="soak")
            began = time.monotonic()
            # The first half asks one SIGKILL per KILL_SECONDS of it (three at least); each kill comes a few seconds after
            # the operator is ready again, so on a loaded machine the half runs on until they are done.
            first = loop.run(seconds / 2, until=lambda: supervisor.kills >= kills_asked(seconds))
            # The second half: one process, no kills; its memory once warm against its memory at the end.
            # Its warm-up counts from when it is ready: the first half's last kill may still be
            # restarting the operator (the supervisor's clock) when the first half ends.
            loop.kill_every = None
            supervisor.wait_running()
            starts = operator.starts
            second = loop.warm_up(warm_up_seconds(seconds))
            warmed_up = time.monotonic()
            with MemorySampler(operator) as memory:
                third = loop.run(comparison_seconds(seconds, warmed_up - began))
            compared = growth(memory.samples)
            one_process = operator.starts == starts
            settled = third.settled(SETTLE_SECONDS)
            given_back = loop.clean_up(SETTLE_SECONDS)
        operator.stop()
    faults = dict(tally.faults)
    return {
        "minutes": minutes,
        "seed": seed,
        "operations": dict(tally.operations),
        "faults": faults,
        "faults_total": sum(faults.values()),
        "toxics_added": dict(proxy.injected),
        "invariant_checks": first.checks + second.checks + third.checks,
        "budget_samples": monitor.samples,
        "violations": tally.violations + settled + given_back,
        "operator_exits": tally.exits,
        "memory": {"start_mib": round(compared.start_bytes / 2**20, 1), "end_mib": round(compared.end_bytes / 2**20, 1),
                   "ratio": round(compared.ratio, 3), "one_process": one_process, "samples": len(memory.samples)},
    }


def failures(report: dict[str, Any]) -> list[str]:
    found = [f"{len(report['violations'])} invariant violation(s)"] if report["violations"] else []
    memory = report["memory"]
    if not memory["one_process"]:
        found.append("the operator restarted during the memory comparison")
    if memory["ratio"] > MEMORY_BAR:
        found.append(f"memory grew {memory['ratio']:.2f}x (bar {MEMORY_BAR:.2f}x)")
    if not report["operations"].get("create") or not report["faults_total"]:
        found.append("no work or no fault happened")
    return found


def render(report: dict[str, Any]) -> Table:
    table = Table(title=f"soak: {report['minutes']:g} min, seed {report['seed']}")
    table.add_column("what")
    table.add_column("count", justify="right")
    for name, count in sorted(report["operations"].items()):
        table.add_row(f"operation: {name}", str(count))
    for name, count in sorted(report["faults"].items()):
        table.add_row(f"fault: {name}", str(count))
    table.add_row("invariant checks", str(report["invariant_checks"]))
    table.add_row("budget samples", str(report["budget_samples"]))
    table.add_row("invariant violations", str(len(report["violations"])))
    table.add_row("operator exits by itself", str(len(report["operator_exits"])))
    memory = report["memory"]
    table.add_row("operator memory start / end", f"{memory['start_mib']} / {memory['end_mib']} MiB ({memory['ratio']:.3f}x)")
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: the time)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "soak")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time())
    shutil.rmtree(args.out / "operator", ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nmo-soak-") as workdir:
        report = soak(args.minutes, seed, Path(workdir), args.out / "operator")
    (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    console = Console(record=True, width=100)
    console.print(render(report))
    for line in report["violations"]:
        console.print(f"[red]violation[/red] {line}")
    found = failures(report)
    for line in found:
        console.print(f"[red]FAILED[/red] {line}")
    (args.out / "report.txt").write_text(console.export_text())
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
