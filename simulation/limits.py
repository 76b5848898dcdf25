"""Never more nodes in maintenance, or unavailable, than a policy allows: its maxParallel and maxUnavailable over its
pool, and each of its topology limits within each label value.

Only a take can break a limit the operator keeps: a node that goes NotReady by itself is not the operator's doing. So
the check is made for each node a step took (its holder record newly set by a node patch), against every policy
governing it after the step; a node that was unavailable already adds nothing to maxUnavailable.
"""

from __future__ import annotations

from node_maintenance.policy import model
from simulation import counting
from simulation.history import History


def limit_violations(history: History) -> list[str]:
    """The limits the newest step's takes broke, each naming the node taken, the count and the limit."""
    newest = history[-1]
    found = []
    for take in newest.takes():
        node_before = newest.before.nodes.get(take.node) or {}
        was_down = bool(node_before) and model.unavailable(node_before)
        governing = set(counting.governed_by(newest.after, take.node))
        for policy in (p for p in counting.policies(newest.after) if p.name in governing):
            for scope in counting.scopes(newest.after, policy, take.node):
                found += [f"node {take.node} taken by NodeMaintenance {take.maintenance}; {sentence}"
                          for sentence in scope.over(unavailable=not was_down)]
    return found
