"""What a maintenance does next, decided from what the cluster shows: one pure function, :func:`plan`.

Inputs are plain objects as the API (or a watch) delivers them, plus what earlier removals met
(``attempts``) and the evictions sent that budgets have not counted yet (``in_flight``); the output
is a ``plans.Plan`` that ``executor`` carries out. Nothing here does I/O or keeps state, so every
situation a drain meets is a table row in the unit tests.

A step first takes the node (``taking``: the checks at takeover, the Lease, the node's patch), then drains it
(``draining``: the removals, paced by budgets, the escalation ladder, the timeout and the status). A maintenance
that onTimeout HandBack ended plans nothing ever again; one whose drain has succeeded has no timeout or ladder any more.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from node_maintenance.coordination import quorum, remediation
from node_maintenance.drain import draining, evicting, status, taking
from node_maintenance.drain.budgets import Coverage, InFlight
from node_maintenance.drain.plans import Attempt, Escalation, Maintenance, Plan, Removal
from node_maintenance.drain.podindex import PodIndex


def plan(
    maintenance: Maintenance,
    node: Mapping[str, Any] | None,
    node_pods: list[dict[str, Any]] | PodIndex,
    budgets: list[dict[str, Any]],
    now: datetime.datetime,
    *,
    holder_exists: bool = True,
    daemonsets: Mapping[str, bool] | None = None,
    attempts: Mapping[str, Attempt] | None = None,
    in_flight: Mapping[str, InFlight] | None = None,
    lease: remediation.LeaseView | None = None,
    members: quorum.Members | None = None,
    coverage: Coverage | None = None,
) -> Plan:
    """Decide the next step of ``maintenance``: the wait its policy asks for (``terms.waiting``: its node and pods are
    not read), or its drain's; the status either reports is written out here.

    ``node_pods`` are the pods bound to the node (a :class:`~node_maintenance.drain.podindex.PodIndex` of them, when
    the caller plans step after step and keeps one), ``budgets`` the PodDisruptionBudgets of their
    namespaces; ``holder_exists`` says whether the NodeMaintenance the node names as its holder
    exists (only read when that is another one); ``daemonsets`` whether the DaemonSets its DaemonSet pods
    name exist (``pods.classify``: one not in it is unknown, and its pods stay); ``lease`` is what is known
    of the node's remediation Lease (None: no coordination with remediation); ``members`` what the
    etcd-quorum guard reads, given when a control-plane node is about to be taken (checked then, however
    long the maintenance waited) and when an escalation step is due on one (``escalation_guard.due``: asked again before
    any escalated deletion); ``coverage`` which of ``budgets`` select each pod (``budgets.Coverage``: a caller
    planning step after step keeps it, so the matching is not done again). The drain's time is the wall clock's
    reckoning capped by what the caller counted (``Maintenance.counted``).
    """
    if maintenance.terms.waiting is not None:  # its policy keeps it waiting: the wait is carried out instead of a drain
        decided = maintenance.terms.waiting
    else:
        taken = taking.take(maintenance, node, now, holder_exists=holder_exists, lease=lease, members=members)
        if isinstance(taken, Plan):
            decided = taken
        else:
            index = node_pods if isinstance(node_pods, PodIndex) else PodIndex.of(node_pods)
            kept = coverage.over(budgets) if coverage is not None else Coverage(budgets)
            decided = draining.drain(draining.Scene.of(maintenance, taken, index, kept, now, daemonsets=daemonsets or {},
                                                       attempts=attempts or {}, in_flight=in_flight or {}))
    # The status the step reports is written out once, here, over the stored one.
    if decided.report is None:
        return decided
    return decided.written(status.render(maintenance.status, decided.report, generation=maintenance.generation, now=now))


def escalations(m: Maintenance, node_pods: list[dict[str, Any]], budgets: list[dict[str, Any]], started: datetime.datetime, *,
                daemonsets: Mapping[str, bool] | None = None) -> list[tuple[Escalation, datetime.datetime, tuple[Removal, ...]]]:
    """What each escalation step of ``m`` deletes, and when (``started``: the drain's start), were the pods and the
    budgets to stay as they are now: the plan's own choice at each step's time (``kubectl nm plan --escalation``); nothing,
    once the drain has succeeded."""
    coverage = Coverage(budgets)
    over = status.drained_once(m.status)
    to_go = PodIndex.of(node_pods).facts(m.selector, m.terms.rules, daemonsets or {}, coverage)
    ladder = []
    for stage in m.escalation:
        at = started + datetime.timedelta(seconds=stage.after)
        step = evicting.removals(m, to_go, coverage, at, {}, {})
        ladder.append((stage, at, () if over else tuple(draining.deletions(m, stage, to_go, step, {}, at.timestamp(), []))))
    return ladder
