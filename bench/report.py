"""The report: JSON for machines, a text table for people, PNG charts, and which goals were met."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
from rich.console import Console
from rich.table import Table

REQUIRED = ("single_node", "api_cost", "goals", "parts")
# The figures of a part that must be numbers when it ran: positive, but those marked "±" ("a.b" is b of the dict at a).
SECTIONS = {
    "timeline": ("drain_seconds", "limit_seconds", "±gap_seconds", "releases", "median_reaction_ms", "±median_notice_lag_ms",
                 "median_recovery_s", "gap_split.operator_start_s", "±gap_split.control_plane_s"),
    "twenty_nodes": ("nodes", "ratio", "operator_vs_pace", "kubectl.seconds", "pace.seconds", "operator.seconds",
                     "kubectl.replacements_per_second", "pace.replacements_per_second", "operator.replacements_per_second",
                     "operator.cpu_ms_per_pod", "kubectl.cpu_ms_per_pod"),
    "fleet": ("nodes", "max_parallel", "drained", "single_node_seconds", "first_seconds", "ideal_seconds", "first_vs_ideal",
              "kubectl_wave_seconds", "first_wave_seconds", "first_wave_vs_kubectl", "held_median_seconds", "slot_empty_median_seconds",
              "slot_empty_p99_seconds", "requests.whole_wait.median", "requests.whole_wait.max", "±requests.per_node_beyond_evictions",
              "±requests.per_node_beyond_evictions_and_waits", "±requests.teardown_per_maintenance_left",
              "±events_per_maintenance.median", "±events_per_maintenance.max", "restart.ready_seconds", "restart.first_eviction_seconds",
              "restart.rss_mib",
              "rss_mib.before", "rss_mib.queued", "rss_mib.peak", "±memory_per_queued_kib", "connections.before", "connections.peak",
              "±connections_added_by_queue", "requests.per_node_total", "cordoned.events", "cordoned.cordons", "cordoned.most"),
}
SECTIONS["fleet_at_limit"] = SECTIONS["fleet"]


def goals(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal of the drain engine with the figure measured for it (None when that part did not run)."""
    single, cost = report.get("single_node") or {}, report.get("api_cost") or {}
    twenty, scale, conv, curve = (report.get(k) or {} for k in ("twenty_nodes", "scale", "conversion", "curve"))
    op, kc = cost.get("operator", {}).get("per_pod_total"), cost.get("kubectl", {}).get("per_pod_total")
    many = twenty.get("nodes", 20)
    rows = [  # the single-node figures are not to regress from those of release 0.5.0's bench
        ("operator/kubectl median drain time", single.get("ratio"), "<=", 0.19),
        ("operator median / budget-recovery limit", single.get("operator_vs_limit"), "<=", 1.2),
        ("API requests per pod (operator)", op, "<=", 1.156),
        ("API requests per pod, operator/kubectl", round(op / kc, 2) if op and kc else None, "<=", 0.5),
        ("API requests per pod without budgets (operator)", (report.get("no_budgets") or {}).get("per_pod_total"), "<=", 2),
        (f"{many} nodes at once: operator / {many} kubectl drains at once", twenty.get("ratio"), "<=", 0.7),
        (f"{many} nodes at once: operator / the control plane's pace (evicted as fast as every budget allows)",
         twenty.get("operator_vs_pace"), "<=", 1.3),
        (f"{many} nodes at once: operator CPU per evicted pod (ms)", (twenty.get("operator") or {}).get("cpu_ms_per_pod"), "<=", 3),
        ("idle RSS at scale (MiB)", (scale.get("idle") or {}).get("rss_mib"), "<=", 100),
        ("idle RSS growth with pods elsewhere (MiB)", scale.get("idle_growth_mib"), "<=", 5),
        *_fleet_goals(report.get("fleet_at_limit") or {}, 5000, 50, 500),
        *_fleet_goals(report.get("fleet") or {}, 1000, 20, 100),
        ("conversion of 500 objects, p99 (ms)", (conv.get("review_500") or {}).get("p99_ms"), "<=", 50),
        ("drain time per pod, largest/smallest node", curve.get("linearity"), "<=", 1.5),
    ]
    return [{"goal": name, "measured": value, "target": f"{op_} {target}",
             "met": None if value is None else bool(value <= target)} for name, value, op_, target in rows]


def _fleet_goals(fleet: dict[str, Any], nodes: int, parallel: int, first: int) -> list[tuple[str, Any, str, float]]:
    """The goals of one fleet, named by its size (``nodes``, ``parallel`` and ``first`` name a fleet that did not run):
    the same targets at 1,000 nodes as at Kubernetes' limit of 5,000, the smaller kept for comparison."""
    nodes, parallel, first = fleet.get("nodes", nodes), fleet.get("max_parallel", parallel), fleet.get("first", first)
    waits, told = (fleet.get("requests") or {}).get("whole_wait") or {}, fleet.get("events_per_maintenance") or {}
    restart, name = fleet.get("restart") or {}, f"fleet of {nodes}:"
    return [
        (f"{name} memory per queued NodeMaintenance, from a fresh process (KiB)", fleet.get("memory_per_queued_kib"), "<=", 2),
        (f"{name} open connections added by {nodes} queued NodeMaintenances", fleet.get("connections_added_by_queue"), "<=", 0),
        (f"{name} peak RSS, {nodes} queued and {parallel} draining (MiB)", (fleet.get("rss_mib") or {}).get("peak"), "<=", 150),
        (f"{name} first {first} nodes drained / ideal", fleet.get("first_vs_ideal"), "<=", 1.3),
        (f"{name} a slot freed until the next node is cordoned, median (s)", fleet.get("slot_empty_median_seconds"), "<=", 0.3),
        (f"{name} a slot freed until the next node is cordoned, p99 (s)", fleet.get("slot_empty_p99_seconds"), "<=", 1),
        (f"{name} requests per queued NodeMaintenance over its whole wait, most of {nodes}", waits.get("max"), "<=", 3),
        (f"{name} requests per drained node besides its evictions and the waits in line",
         (fleet.get("requests") or {}).get("per_node_beyond_evictions_and_waits"), "<=", 10),
        (f"{name} events per NodeMaintenance, most of {nodes}", told.get("max"), "<=", 3),
        (f"{name} restarted in the middle, its first eviction after its start (s)", restart.get("first_eviction_seconds"), "<=", 10),
        (f"{name} restarted in the middle, peak RSS until then (MiB)", restart.get("rss_mib"), "<=", 150),
        (f"{name} first {parallel} nodes drained / as many kubectl drains at once", fleet.get("first_wave_vs_kubectl"), "<=", 1.0),
    ]


def write(report: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    report["goals"] = goals(report)
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (out / "report.txt").write_text(text(report))
    charts(report, out)


def text(report: dict[str, Any]) -> str:
    console = Console(record=True, width=110, file=io.StringIO())  # recorded, then exported; nothing shown
    single = report.get("single_node") or {}
    table = Table(title=f"Single node, {single.get('pods')} pods, {len(single.get('rounds', []))} round(s)")
    for column in ("case", "kubectl drain (s)", "operator (s)", "ratio"):
        table.add_column(column)
    for case in ("rounds", "grace_30s"):
        for i, r in enumerate(single.get(case) or []):
            table.add_row(f"{case} {i + 1} ({r['first']} first)", f"{r['kubectl']:.2f}", f"{r['operator']:.2f}", f"{r['operator'] / r['kubectl']:.2f}")
    table.add_row("median", f"{single.get('kubectl_median', 0):.2f}", f"{single.get('operator_median', 0):.2f}", f"{single.get('ratio', 0):.2f}")
    console.print(table)
    console.print(f"budget-recovery limit: {single.get('limit_seconds')} s ({single.get('waves')} waves x {single.get('wave_seconds')} s"
                  " with every budget recovering at once, plus the grace period)")
    cost = report.get("api_cost") or {}
    table = Table(title="API requests per drained pod")
    for column in ("request", "operator", "kubectl drain"):
        table.add_column(column)
    keys = sorted(set(cost.get("operator", {}).get("per_pod", {})) | set(cost.get("kubectl", {}).get("per_pod", {})))
    for key in keys:
        table.add_row(key, str(cost["operator"]["per_pod"].get(key, 0)), str(cost["kubectl"]["per_pod"].get(key, 0)))
    table.add_row("total", str(cost.get("operator", {}).get("per_pod_total")), str(cost.get("kubectl", {}).get("per_pod_total")))
    console.print(table)
    for name, show in (("timeline", _timeline), ("twenty_nodes", _twenty), ("fleet", _fleet), ("fleet_at_limit", _fleet)):
        if report.get(name):
            if "error" in report[name]:
                console.print(f"{name}: {json.dumps(report[name], sort_keys=True)}")
            else:
                show(console, report[name])
    for name in ("no_budgets", "curve", "scale", "conversion", "profile", "control_plane_flags", "load_average_after"):
        if report.get(name):
            console.print(f"{name}: {json.dumps(report[name], sort_keys=True)}")
    table = Table(title="Goals")
    for column in ("goal", "measured", "target", "met"):
        table.add_column(column)
    for g in report["goals"]:
        table.add_row(g["goal"], str(g["measured"]), g["target"], {True: "yes", False: "NO", None: "not run"}[g["met"]])
    console.print(table)
    return console.export_text()


def _timeline(console: Console, timeline: dict[str, Any]) -> None:
    """Wave by wave, when the budgets allowed, when the operator saw it and when it sent (medians over the budgets)."""
    table = Table(title=f"One drain of {timeline['pods']} pods, wave by wave (seconds since the NodeMaintenance; medians over the budgets)")
    for column in ("wave", "budgets", "allowed", "saw", "sent", "recovery (s)", "notice lag (ms)", "reaction (ms)"):
        table.add_column(column)
    for w in timeline["waves"]:
        table.add_row(*(str(w[k]) if w[k] is not None else "-" for k in
                        ("wave", "budgets", "allowed_s", "saw_s", "sent_s", "recovery_s", "notice_ms", "reaction_ms")))
    console.print(table)
    split = timeline["gap_split"]
    console.print(f"medians: operator reaction (saw → sent) {timeline['median_reaction_ms']} ms, notice lag (allowed → saw) "
                  f"{timeline['median_notice_lag_ms']} ms, control plane's recovery (sent → allowed) {timeline['median_recovery_s']} s; "
                  f"{timeline['unmatched']} of {timeline['releases']} releases unmatched")
    console.print(f"drain {timeline['drain_seconds']} s, budget-recovery limit {timeline['limit_seconds']} s: the gap of "
                  f"{timeline['gap_seconds']} s along budget {timeline['critical_budget']} is the operator's start "
                  f"{split['operator_start_s']} s + its reactions {split['operator_reaction_s']} s + notice lags {split['notice_lag_s']} s "
                  f"+ the control plane's {split['control_plane_s']} s")


def _twenty(console: Console, twenty: dict[str, Any]) -> None:
    table = Table(title=f"{twenty['nodes']} nodes at once, side by side (set up in {twenty['setup_seconds']} s; {twenty['first']} "
                        f"first, then {twenty['settle_seconds']} s until its nodes' workloads were at rest)")
    for column in ("", "kubectl drain", "as budgets allow", "operator"):
        table.add_column(column)
    for key, name in (("seconds", "seconds"), ("replacements_per_second", "replacements per second"),
                      ("cpu_ms_per_pod", "CPU per evicted pod (ms)")):
        table.add_row(name, str(twenty["kubectl"][key]), str((twenty.get("pace") or {}).get(key)), str(twenty["operator"][key]))
    table.add_row("operator / kubectl", "", "", str(twenty["ratio"]))
    table.add_row("operator / as budgets allow (the control plane's pace)", "", "", str(twenty.get("operator_vs_pace")))
    table.add_row("operator / its single-node median", "", "", str(twenty.get("ratio_to_single")))
    console.print(table)


def _fleet(console: Console, fleet: dict[str, Any]) -> None:
    table = Table(title=f"Fleet: {fleet['nodes']} NodeMaintenances queued at once, maxParallel {fleet['max_parallel']}")
    for column in ("", "before", "while queueing (peak)", "queued", "peak"):
        table.add_column(column)
    table.add_row("operator RSS (MiB)", *(str(fleet["rss_mib"][k]) for k in ("before", "queueing_peak", "queued", "peak")))
    table.add_row("open connections", *(str(fleet["connections"][k]) for k in ("before", "queueing_peak", "queued", "peak")))
    console.print(table)
    requests = fleet["requests"]
    console.print(f"memory per queued NodeMaintenance {fleet['memory_per_queued_kib']} KiB; connections added by the queue "
                  f"{fleet['connections_added_by_queue']}; created in {fleet['create_seconds']} s, all queued after {fleet['queued_after_seconds']} s")
    console.print(f"first {fleet['first']} nodes drained in {fleet['first_seconds']} s, ideal {fleet['ideal_seconds']} s "
                  f"({fleet['first']} / {fleet['max_parallel']} x {fleet['single_node_seconds']} s for one such node alone): "
                  f"{fleet['first_vs_ideal']}")
    console.print(f"first {fleet['max_parallel']} nodes drained in {fleet['first_wave_seconds']} s, {fleet['max_parallel']} kubectl drains at "
                  f"once on as many of its nodes {fleet['kubectl_wave_seconds']} s: {fleet['first_wave_vs_kubectl']}; a node held "
                  f"{fleet['held_median_seconds']} s (median, cordoned to handed back), a slot empty {fleet['slot_empty_median_seconds']} s "
                  f"(median; p99 {fleet['slot_empty_p99_seconds']} s)")
    waits, told = requests["whole_wait"], fleet["events_per_maintenance"]
    console.print(f"operator requests: {requests['queueing_per_maintenance']} per queued NodeMaintenance while queueing "
                  f"({json.dumps(requests['queueing_by_request'], sort_keys=True)}); over each one's whole wait (until its node was "
                  f"taken, {waits['taken']} were, or the fleet's end) median {waits['median']}, most {waits['max']}; events per "
                  f"NodeMaintenance median {told['median']}, most {told['max']}; {requests['per_node_total']} per drained node over the "
                  f"fleet, {requests['per_node_beyond_evictions']} besides its evictions, {requests['per_node_beyond_evictions_and_waits']} "
                  f"besides its evictions and every wait in line ({fleet['drained']} drained; "
                  f"{json.dumps(requests['per_node'], sort_keys=True)}); the teardown then deleted every NodeMaintenance, gone after "
                  f"{fleet['teardown_seconds']} s, those left in line at {requests['teardown_per_maintenance_left']} requests each ({json.dumps(requests['teardown_by_request'], sort_keys=True)})")
    decisions = fleet["decisions"]
    console.print(f"the policies' decisions while the fleet queued and its first nodes drained: {decisions['changes']} changes heard, "
                  f"{decisions['lines_decided']} lines decided, {decisions['cpu_seconds']} s of CPU: {decisions['cpu_ms_per_change']} ms "
                  f"per change, {decisions['cpu_ms_per_line']} ms per line decided")
    restart = fleet["restart"]
    console.print(f"restarted in the middle of the fleet: ready after {restart['ready_seconds']} s, first eviction after "
                  f"{restart['first_eviction_seconds']} s ({restart.get('cpu_seconds_until_evicting')} s of CPU), RSS until then "
                  f"{restart['rss_mib']} MiB")
    if profile := restart.get("profile"):
        console.print(f"where the restarted operator's time went until it evicted ({profile['stacks']}): " + ", ".join(
            f"{hot['function']} {hot['share']:.1%}" for hot in profile["hottest"][:8]))
    cordoned = fleet["cordoned"]
    console.print(f"nodes cordoned at once: at most {cordoned['most']} (maxParallel {fleet['max_parallel']}; "
                  f"{cordoned['events']} node changes watched, {cordoned['cordons']} cordons)")
    if profile := fleet.get("profile"):
        console.print(f"where the operator's time went while {profile['case']} drained ({profile['stacks']}): " + ", ".join(
            f"{hot['function']} {hot['share']:.1%}" for hot in profile["hottest"][:8]))


def charts(report: dict[str, Any], out: Path) -> None:
    single = report.get("single_node") or {}
    if single.get("rounds"):
        figure, axes = plt.subplots(figsize=(7, 4))
        rounds = single["rounds"]
        x = range(1, len(rounds) + 1)
        axes.bar([i - 0.2 for i in x], [r["kubectl"] for r in rounds], 0.4, label="kubectl drain")
        axes.bar([i + 0.2 for i in x], [r["operator"] for r in rounds], 0.4, label="NodeMaintenance")
        if single.get("limit_seconds"):
            axes.axhline(single["limit_seconds"], linestyle="--", color="grey", label="budget-recovery limit")
        axes.set(xlabel="round", ylabel="seconds", title=f"Drain of {single.get('pods')} pods")
        axes.legend()
        figure.savefig(out / "single-node.png", dpi=100, bbox_inches="tight")
        plt.close(figure)
    cost = report.get("api_cost") or {}
    if cost:
        figure, axes = plt.subplots(figsize=(7, 4))
        keys = sorted(set(cost["operator"]["per_pod"]) | set(cost["kubectl"]["per_pod"]))
        for i, who in enumerate(("operator", "kubectl")):
            bottom = 0.0
            for key in keys:
                value = cost[who]["per_pod"].get(key, 0)
                axes.bar(i, value, bottom=bottom, label=key if i == 0 or key not in cost["operator"]["per_pod"] else None)
                bottom += value
        axes.set_xticks([0, 1], ["operator", "kubectl drain"])
        axes.set(ylabel="requests per drained pod", title="API cost")
        axes.legend(fontsize=6)
        figure.savefig(out / "api-cost.png", dpi=100, bbox_inches="tight")
        plt.close(figure)
    curve = (report.get("curve") or {}).get("points")
    if curve:
        figure, axes = plt.subplots(figsize=(7, 4))
        axes.plot([p["pods"] for p in curve], [p["seconds"] for p in curve], marker="o")
        axes.set(xlabel="pods per node", ylabel="drain seconds", title="Operator drain time by pods per node")
        figure.savefig(out / "scaling-curve.png", dpi=100, bbox_inches="tight")
        plt.close(figure)


def _malformed(name: str, section: dict[str, Any]) -> list[str]:
    """What is wrong with the figures of one part (``SECTIONS``)."""
    problems = []
    for figure in SECTIONS[name]:
        key = figure.lstrip("±")
        value: Any = section
        for step in key.split("."):
            value = value.get(step) if isinstance(value, dict) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            problems.append(f"{name}.{key} is not a number: {value!r}")
        elif value <= 0 and not figure.startswith("±"):
            problems.append(f"{name}.{key} is not positive: {value!r}")
    return problems


def check(out: Path) -> list[str]:
    """What is wrong with a written report (an empty list when it is well formed)."""
    problems = []
    path = out / "report.json"
    if not path.exists():
        return [f"{path} missing"]
    report = json.loads(path.read_text())
    problems += [f"report.json lacks {key}" for key in REQUIRED if key not in report]
    single = report.get("single_node") or {}
    for key in ("kubectl_median", "operator_median", "ratio"):
        if not isinstance(single.get(key), (int, float)) or single[key] <= 0:
            problems.append(f"single_node.{key} is not a positive number: {single.get(key)!r}")
    for who in ("operator", "kubectl"):
        if not (report.get("api_cost") or {}).get(who, {}).get("per_pod"):
            problems.append(f"api_cost.{who}.per_pod is empty")
    for name in report.get("parts") or []:
        if name not in report:
            problems.append(f"part {name} did not report")
        elif "error" in report[name]:
            problems.append(f"part {name} failed: {report[name]['error']}")
        elif name in SECTIONS:
            problems += _malformed(name, report[name])
    table = out / "report.txt"
    if not table.exists() or not table.read_text().strip():
        problems.append("report.txt missing or empty")
    if not (out / "single-node.png").exists():
        problems.append("single-node.png missing")
    return problems
