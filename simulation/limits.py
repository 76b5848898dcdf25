"""Never more nodes in maintenance, or unavailable, than a policy allows: its maxParallel and maxUnavailable over its
pool, and each of its topology limits within each label value.

Only a take can break a limit the operator keeps: a node that goes NotReady by itself is not the operator's doing. So
the check is made for each node a step took (its holder record newly set by a node patch), against every policy
governing it after the step, counting the nodes recovering as the history shows them (``given_back``) besides those the
policy's status lists, and a policy deleted moments ago as still governing (``counting.with_departed``: a replace);
a node that was unavailable already adds nothing to maxUnavailable. A change a user made
just before the step (a policy created or edited, a node relabelled into a pool) counts from the step after: the take
may have been decided the instant before its watch event arrived (``_over``).
"""

from __future__ import annotations

from node_maintenance.policy import model
from simulation import counting, given_back
from simulation.history import History, State


def limit_violations(history: History) -> list[str]:
    """The limits the newest step's takes broke, each naming the node taken, the count and the limit."""
    newest = history[-1]
    takes = newest.takes()
    if not takes:
        return []
    after = counting.with_departed(history, newest.after)
    knew = counting.policies_known(history)
    found = []
    for take in takes:
        recovering = given_back.recovering(history, until=take.revision)
        node_before = newest.before.nodes.get(take.node) or {}
        was_down = bool(node_before) and model.unavailable(node_before)
        governing = set(counting.governed_by(after, take.node))
        for policy in (p for p in counting.policies(after) if p.name in governing):
            back = recovering.get(policy.name, set())
            if not _over(after, knew, policy, take.node, was_down, back):
                continue
            for scope in counting.scopes(after, policy, take.node, back):
                found += [f"node {take.node} taken by NodeMaintenance {take.maintenance}; {sentence}"
                          for sentence in scope.over(unavailable=not was_down)]
    return found


def _over(after: State, knew: State, policy: model.Policy, node: str, was_down: bool, back: set[str]) -> bool:
    """Whether the take of ``node`` broke ``policy``'s limits both as they are after the step and as the operator
    surely knew them (``knew``: the end of the step before, as far as its watch of the policies had brought it). A
    user's change made between two steps (the policy created or edited, the node relabelled into its pool) reaches the
    operator through a watch, at the same instant as the step starts: a take decided just before it arrived is judged
    by what was known."""
    if not any(scope.over(unavailable=not was_down) for scope in counting.scopes(after, policy, node, back)):
        return False
    earlier = counting.policy(knew, policy.name)
    if earlier is None or policy.name not in counting.governed_by(knew, node):
        return False
    return any(scope.over(unavailable=not was_down) for scope in counting.scopes(after, earlier, node, back))
