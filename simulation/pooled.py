"""The policies' decision, kept pool by pool, is the one the whole cluster decided afresh gives.

Each policy's line is decided again only when a change touches its pool (``runtime.policies.decisions``). A change that
decided too few pools again (a node moving between pools, a holder's NodeMaintenance deleted, a recovering node, a
window's boundary) would leave a line decided from what no longer holds: a slot granted twice, or a maintenance left
waiting for nothing. After every step, the decision kept, when there is one, is compared with a decision of every
pool at once made from the same reads (``Decisions.afresh``): what each maintenance acts on and each line's counts.
"""

from __future__ import annotations

from node_maintenance.policy.verdicts import Decision, Verdict, acted_on
from simulation.process import Process


def differences(process: Process | None) -> list[str]:
    """How the decision kept differs from the whole cluster decided afresh (none when nothing is kept)."""
    decisions = process.policies.decisions if process is not None else None
    kept = decisions.current if decisions is not None else None
    if decisions is None or kept is None:
        return []
    return [f"the decision kept pool by pool is the one made afresh: {difference}" for difference in _compared(kept, decisions.afresh())]


def _compared(kept: Decision, afresh: Decision) -> list[str]:
    found = [f"NodeMaintenance {name}: kept {_said(kept.verdicts.get(name))}, afresh {_said(afresh.verdicts.get(name))}"
             for name in sorted(kept.verdicts.keys() | afresh.verdicts.keys())
             if acted_on(kept.verdicts.get(name)) != acted_on(afresh.verdicts.get(name))]
    for policy in sorted(kept.summaries.keys() | afresh.summaries.keys()):
        before, after = kept.summaries.get(policy), afresh.summaries.get(policy)
        counts = [(s.selected, s.in_maintenance, s.unavailable, s.queue, s.conflicts) if s is not None else None for s in (before, after)]
        if counts[0] != counts[1]:
            found.append(f"policy {policy}: kept {counts[0]}, afresh {counts[1]}")
    return found


def _said(verdict: Verdict | None) -> str:
    if verdict is None:
        return "no verdict"
    return f"{verdict.kind}" + (f" of policy {verdict.policy.name}" if verdict.policy is not None else "") + (" (paused)" if verdict.paused else "")
