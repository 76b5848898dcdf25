"""A maintenance takes its node only in its turn: while a window of its policy is open, and ahead of no older
maintenance of the same policy that was waiting for the slot it took.

"Older" is creation order, and the API stamps creation to the second: maintenances created in the same second are not
compared here (the operator orders those by name). A maintenance overtaken is one that waited (not holding its node,
not deleted, not ended, not having given its slot back, its node governed by this policy alone) and that the policy's
counts had room for before the take and no longer have after it: the take used its slot (unless it took its own node
in the same step). A take whose slot the maintenance's status already showed granted is not judged again: the grant
was made in its turn and stands, whatever came since (a window closing, or an older maintenance created meanwhile, as
a wall clock set back can stamp one). Nor is a take after a window closed by a maintenance that waited in that window
with room for its node and none older waiting that fitted too, since the operator last started: the operator may have
granted its slot then, and that grant stands through the close (docs/policy.md, "Maintenance windows") even when the
status never showed it (the drain held before writing it, the policies unknown a moment: seed 1373037640 of Rolling), and
even when the states show the policy gone then, deleted moments ago by a replace, as long as the operator saw it while
running (a deleted policy still paces for its grace: seed 1091069782 of Windowed). Nor is a take ahead of a maintenance
stamped older by a wall clock set back, when the taker waited first in line with room before that one existed, since the
operator last started: a grant then stands, unless taken back since, though its status write was lost (seed 3094506084
of Windowed).
Whether the take itself had room is :mod:`simulation.limits`' check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from node_maintenance.drain import status
from node_maintenance.drain.nodes import HOLDER
from node_maintenance.policy import line, model
from simulation import counting, given_back
from simulation.history import STEP_SECONDS, ActionKind, History, State, Step, Take


def turn_violations(history: History) -> list[str]:
    """The newest step's takes made out of turn: while every window of the policy was closed, or ahead of an older
    maintenance waiting for that slot."""
    newest = history[-1]
    found = []
    taking = {take.maintenance for take in newest.takes()}
    for take in newest.takes():
        if _granted(newest.before.maintenances.get(take.maintenance)):
            continue  # its slot was granted in its turn, the status says so, and a grant stands
        governing = set(counting.governed_by(newest.after, take.node))
        for policy in (p for p in counting.policies(newest.after) if p.name in governing):
            if not counting.window_open(policy, newest.before.at, newest.after.at) and not _fitted_in_a_window(history, policy.name, take):
                found.append(f"node {take.node} taken by NodeMaintenance {take.maintenance} while no window of "
                             f"NodeMaintenancePolicy {policy.name} was open")
            found += [f"node {take.node} taken by NodeMaintenance {take.maintenance} under NodeMaintenancePolicy {policy.name} ahead of "
                      f"the older NodeMaintenance {older} (node {node}), which waited for the slot it took"
                      for older, node in _overtaken(history, policy, take)
                      if older not in taking and not _fitted_before(history, policy.name, take, newest.before.maintenances[older])]
    return found


def _granted(maintenance: Mapping[str, Any] | None) -> bool:
    """Whether the maintenance's status already showed a slot granted (a slot granted while a window was open stands
    after it closes)."""
    return any(c.get("type") == model.QUEUED and c.get("reason") == model.QueuedReason.SLOT_GRANTED
               for c in ((maintenance or {}).get("status") or {}).get("conditions") or ())


def _fitted_in_a_window(history: History, policy: str, take: Take) -> bool:
    """Whether the taker waited for its node under ``policy`` in a state of the policy's last open window before the
    take, with room for the node and no older maintenance waiting that fitted too: a slot it may have been granted then,
    which stands through the close unless taken back since (``_keeps_a_grant``). Looked for since the operator last
    started (a grant lives in its memory only) and since the taker was created."""
    taker = history[-1].after.maintenances.get(take.maintenance) or history[-1].before.maintenances.get(take.maintenance) or {}
    uid, created = taker.get("metadata", {}).get("uid"), taker.get("metadata", {}).get("creationTimestamp") or ""
    opened = False
    for state in reversed(_lived(history)):
        maintenance = state.maintenances.get(take.maintenance)
        if maintenance is None or maintenance["metadata"].get("uid") != uid:
            return False  # before the taker was created: no grant of then stands
        governing = counting.policy(state, policy)
        if governing is None:
            continue
        if not counting.window_open(governing, state.at):
            if opened:
                return False  # an earlier window: a slot granted in it was taken in it
            if not _keeps_a_grant(state, policy, governing, take):
                return False  # a grant made before was taken back since
            continue
        opened = True
        if _first_to_fit(state, policy, governing, take, created):
            return True
        if not _keeps_a_grant(state, policy, governing, take):
            return False
    return False


def _fitted_before(history: History, policy: str, take: Take, older: Mapping[str, Any]) -> bool:
    """Whether the taker waited for its node under ``policy``, with room and in an open window, with no maintenance
    older than it waiting that fitted too, in a state before ``older`` existed, since the operator last started: its
    slot may have been granted then, and a grant stands until taken back (``_keeps_a_grant``), though a wall clock set back
    since stamped ``older`` as created before it (seed 3094506084 of Windowed, the grant's status write lost to faults)."""
    taker = history[-1].before.maintenances.get(take.maintenance) or {}
    uid, created = taker.get("metadata", {}).get("uid"), taker.get("metadata", {}).get("creationTimestamp") or ""
    for state in reversed(_lived(history)):
        maintenance = state.maintenances.get(take.maintenance)
        if maintenance is None or maintenance["metadata"].get("uid") != uid:
            return False  # before the taker was created
        governing = counting.policy(state, policy)
        if governing is None:
            continue
        then = state.maintenances.get(older["metadata"]["name"])
        if (then is None or then["metadata"].get("uid") != older["metadata"].get("uid")) and counting.window_open(governing, state.at) \
                and _first_to_fit(state, policy, governing, take, created):
            return True  # ``older`` did not exist yet
        if not _keeps_a_grant(state, policy, governing, take):
            return False  # a grant made before was taken back since
    return False


def _keeps_a_grant(state: State, policy: str, governing: model.Policy, take: Take) -> bool:
    """Whether a slot granted to the taker before ``state`` stands in it (policy.line): the taker still waits for its
    node under the policy (it did not give the slot back, nobody else holds the node, the policy still selects it), and
    the limits still have room for it (a limit lowered takes back the latest grants)."""
    return _waiting(state, policy, state.maintenances[take.maintenance]) == take.node and _fits(state, governing, take.node)


def _first_to_fit(state: State, policy: str, governing: model.Policy, take: Take, created: str) -> bool:
    """Whether, in ``state``, the taker waits for its node with room for it, and still has room once the line has granted,
    in its order (``policy.line.order``), each older maintenance waiting that fits beside those granted before it: the slot the line would
    grant it (older ones in another topology domain, or under a limit of several, leave it room: seed 1253708182 of
    Closing)."""
    if not _keeps_a_grant(state, policy, governing, take):
        return False
    older = sorted((line.order(m), name) for name, m in state.maintenances.items()
                   if name != take.maintenance and (m["metadata"].get("creationTimestamp") or "") < created)
    granted, _ = _line_grants(state, policy, governing, [name for _, name in older])
    return _fits(granted, governing, take.node)


def _lived(history: History) -> list[State]:
    """The states the running operator lived through, from the step after its last start: a grant made before it started
    lived in the memory of a process since gone. In each, a policy deleted moments ago is put back as it last showed in
    them, within the grace a deleted policy keeps pacing (``counting.REPLACE_GRACE_SECONDS``, on the monotonic clock the
    steps run on, as the operator counts it; a step more, since the grace starts when its watch brings the deletion): its
    slots may be granted meanwhile, and such a grant stands under the policy of its name that replaces it (seed 1091069782
    of Windowed: a maintenance created and its policy deleted by a replace at one instant, its slot granted in the window
    and taken after the close). One the operator never saw while running (deleted before it started) grants nothing.
    One deleted since the state before is put back as the API last held it, which the operator's watch brought: an edit,
    or a whole policy created again by a replace, and its deletion may all fall between two states (seed 1550767387 of
    Closing: the windows removed and the policy replaced twice, a slot granted meanwhile under the policy without windows).
    The step it started before is one it lived through from its start (seed 1675138370 of Closing: started a second
    before the window closed, it granted the slot at once and took the node at the close, within that step), with the
    policies its first listing surely showed: those still there at the step's end."""
    start = next((at for at in range(len(history) - 1, -1, -1) if history[at].started), 0)
    lived: list[State] = []
    shown: dict[str, tuple[float, Mapping[str, Any]]] = {}  # each policy as it last showed, and the seconds since
    # Deleted after this revision: while the operator ran; of the step it started in, only what was there at its end was seen.
    since = history[start].after.revision if history[start].started else history[start].before.revision
    for step in history[start:]:
        state = step.before
        if step.started:
            state = replace(state, policies={name: body for name, body in state.policies.items() if name in step.after.policies})
        deleted = {name: (0.0, body) for name, body in state.departed.items()
                   if name not in state.policies and int(body["metadata"].get("resourceVersion") or 0) > since}
        shown = {**{name: kept for name, kept in shown.items() if name not in state.policies}, **deleted,
                 **{name: (0.0, body) for name, body in state.policies.items()}}
        departed = [body for name, (seconds, body) in shown.items()
                    if name not in state.policies and seconds <= counting.REPLACE_GRACE_SECONDS + STEP_SECONDS]
        lived.append(state.put(policies=departed) if departed else state)
        shown = {name: (seconds + step.seconds(), body) for name, (seconds, body) in shown.items()}
        since = max(since, state.revision)
    return lived


def _fits(state: State, policy: model.Policy, node: str) -> bool:
    return all(scope.room(node) for scope in counting.scopes(state, policy, node))


def _waiting(state: State, policy: str, maintenance: Mapping[str, Any]) -> str | None:
    """The node the maintenance waits to take under ``policy`` in ``state``, None when it does not wait there."""
    node = str((maintenance.get("spec") or {}).get("nodeName") or "")
    ended = maintenance["metadata"].get("deletionTimestamp") or status.timed_out(maintenance.get("status") or {})
    if ended or model.gave_back(maintenance) or node not in state.nodes or state.holder(node):
        return None
    return node if counting.governed_by(state, node) == (policy,) else None


def _overtaken(history: History, policy: model.Policy, take: Take) -> list[tuple[str, str]]:
    """The older maintenances waiting under ``policy`` that the line granted a slot before the take and no longer grants
    after it (each in line order, beside those granted before it): after this take alone (another maintenance's take in
    the same step, one earlier in line, may fill an older one's topology domain; that take is judged on its own), and
    with the hand-backs of the step made before it (``_freed_before``), whose slots it may have taken while the older
    ones kept theirs (seed 1491276738 of Zoned: an older maintenance granted its slot and slowed by faults, a node given
    back and the next maintenance taking the slot it freed, in one step)."""
    before, after = history[-1].before, history[-1].after
    taker = before.maintenances.get(take.maintenance) or after.maintenances.get(take.maintenance) or {}
    created = taker.get("metadata", {}).get("creationTimestamp") or ""
    # Not one that held its node as the step began: its hand-back ended it (deleted, or by its timeout), whatever its
    # status showed then (seed 2151111732 of Retiring: timed out and given back, then the next one took the slot).
    older = [name for _, name in sorted((line.order(m), name) for name, m in before.maintenances.items()
                                        if name != take.maintenance and (m["metadata"].get("creationTimestamp") or "") < created
                                        and before.holder(str((m.get("spec") or {}).get("nodeName") or "")) != name)]
    freed = before.put(nodes=_freed_before(history, policy.name, take))
    taken = freed.put(nodes=[after.nodes[take.node]]) if take.node in after.nodes else after
    _, could = _line_grants(freed, policy.name, policy, older)
    _, can = _line_grants(taken, policy.name, policy, older)
    return [granted for granted in could if granted not in can]


def _freed_before(history: History, policy: str, take: Take) -> list[Mapping[str, Any]]:
    """The nodes the newest step gave back before the take (both revisions known) that are free after it: nobody holds
    them and they wait for no workload under ``policy``, neither as its status lists them nor as the history shows their
    drains (``given_back``: a write of the list may be skipped or lost)."""
    newest = history[-1]
    back = [action.key for action in newest.of_kind(ActionKind.NODE_PATCH)
            if action.key in newest.gives_back() and action.holder_written == (True, None)
            and action.revision and take.revision and action.revision < take.revision]
    if not back:
        return []
    recovering = given_back.recovering([*history, Step(before=newest.after, actions=(), after=newest.after)]).get(policy, set())
    return [newest.after.nodes[node] for node in back if node in newest.after.nodes and not newest.after.holder(node)
            and node not in recovering and node not in counting.recovering(newest.after, policy)]


def _line_grants(state: State, policy: str, governing: model.Policy, names: list[str]) -> tuple[State, list[tuple[str, str]]]:
    """The slots the line grants in ``state`` to those of ``names``, in their order, that wait under ``policy`` and fit
    beside those granted before them, each with its node; and the state with those nodes held."""
    granted, found = state, []
    for name in names:
        node = _waiting(state, policy, state.maintenances[name])
        if node is not None and _fits(granted, governing, node):
            held = granted.nodes[node]
            annotations = {**(held["metadata"].get("annotations") or {}), HOLDER: name}
            granted = granted.put(nodes=[{**held, "metadata": {**held["metadata"], "annotations": annotations}}])
            found.append((name, node))
    return granted, found
