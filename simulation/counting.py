"""A policy's nodes counted as an admin counts them, in one state: which it governs, which are in maintenance and which
are unavailable, over its whole pool and within each topology domain a node is in.

Counted from the objects themselves, not from the operator's line (``policy.line``), so that the limits are checked
against what the cluster shows: a node is in maintenance when its holder record names a NodeMaintenance that exists,
or while its policy's status lists it as recovering (waitForHealthy keeps its slot); it is unavailable when held,
unschedulable or not Ready. Limits are resolved as ``policy.model.resolve`` documents (a percentage of the scope's
nodes rounded down, at least one unless 0%).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from node_maintenance.drain.nodes import policy_of
from node_maintenance.policy import model
from simulation.history import STEP_SECONDS, History, State, known

# docs/policy.md, "Deleting or replacing a policy": a policy deleted keeps pacing and protecting that long (said here,
# not read from the operator's constant: the promise must not move with the code it judges).
REPLACE_GRACE_SECONDS = 30.0


def policies(state: State) -> list[model.Policy]:
    return [model.Policy.of(body) for _, body in sorted(state.policies.items())]


def with_departed(history: History, state: State) -> State:
    """``state`` with each policy deleted within REPLACE_GRACE_SECONDS before it put back as the API last held it, unless one of its
    name exists again (a replace: the new one governs at once). Two steps short of the grace: the operator counts it on
    its own clock, from when its watch brought the deletion. One deleted before the operator (restarted) had its first
    listing of the policies is not, since nothing tells of it, unless a node in ``state`` is held under it (docs/policy.md:
    the operator then holds); one that was still there at that listing, or created after it, was seen, by the listing or
    by the watch that follows it, even if it came and went between two states."""
    recent = history[-int(REPLACE_GRACE_SECONDS / STEP_SECONDS) + 2:]
    if not recent:
        return state
    recorded = {policy_of(dict(node)) for name, node in state.nodes.items() if state.holder(name)}
    seen = _seen(recent)
    since = recent[0].before.revision  # removed since: within the grace
    gone = [(name, body) for name, body in state.departed.items() if int(body["metadata"].get("resourceVersion") or 0) > since]
    departed: dict[str, Any] = {}
    for name, body in [*gone, *((n, b) for st in reversed(recent) for n, b in st.before.policies.items())]:
        last = state.departed.get(name) or body
        if name not in state.policies and (name in recorded or seen(name, last)):
            departed.setdefault(name, last)
    return state.put(policies=list(departed.values())) if departed else state


def policies_known(history: History) -> State:
    """What the operator surely knew as the newest step began (``history.known``), its policies as far as its watch of
    them had brought it (gone silent, or failed and not resumed: as the latest state at or before the revision it had
    reached held them), and those deleted moments before that put back (``with_departed``): what the limits, the recovery and the
    removal judges read the policies from. Seeds 2113657920 of Search and 3265660538 of Closing: an operator started
    again listed the policies in the gap of a replace, its watch then silent, and drained (took its node) under none
    while the new policy, created after that listing, never reached it. Rounding down to a state is strict: what it had
    reached within a step is not known."""
    then = known(history)
    told = history[-2].told if len(history) > 1 else None
    if told is None or told >= then.revision or history[-1].started:  # a process started since lists them itself
        return with_departed(history[:-1], then)
    reached = [state for st in history for state in (st.before, st.after) if state.revision <= told]
    policies_then = reached[-1] if reached else history[0].before
    then = replace(then, policies=policies_then.policies, departed=policies_then.departed)  # the rest as other watches brought it
    put_back = with_departed(history[:-1], then)
    # Only those deleted by then: one the states since show, and ``then`` neither holds nor saw deleted, came after it.
    later = [name for name in put_back.policies if name not in then.policies and name not in then.departed]
    return put_back.drop("policies", *later) if later else put_back


def _seen(recent: History) -> Callable[[str, Mapping[str, Any]], bool]:
    """Whether the operator running in the newest step saw the policy of that name, as last held (``last``). Its first
    listing (``Step.listed``) shows those there then; its watch, those created or changed since. A history that does
    not know the listing, or whose newest step wrote before it (a take before the policies were listed, which nothing
    excuses), takes it as made when the operator's first step began, with those already there before that step seen
    only if a state from then on shows them (it may have listed them within the step, or just after they went)."""
    start = max((i for i, st in enumerate(recent) if st.started), default=0)
    listing = recent[-1].listed
    if listing is not None and all(action.revision >= listing for action in recent[-1].actions):
        # The very objects, not their names: one deleted before the listing is not seen for a namesake shown after it
        # (seed 2113657920 of Search, a replace whose deletion came before the restarted operator's first listing).
        shown = {_uid(body) for st in recent for then in (st.before, st.after) if then.revision >= listing for body in then.policies.values()}
        return lambda _name, last: _uid(last) in shown or _revision(last) > listing
    shown = {name for st in recent[start:] for name in st.after.policies}
    before_start = [*(then for st in recent[:start] for then in (st.before, st.after)), recent[start].before]
    older = {_uid(body) for then in before_start for body in then.policies.values()}
    first_step = recent[start].before.revision
    return lambda name, last: name in shown or (_uid(last) not in older and _revision(last) > first_step)


def _revision(body: Mapping[str, Any]) -> int:
    return int((body.get("metadata") or {}).get("resourceVersion") or 0)


def _uid(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("uid", ""))


def window_open(policy: model.Policy, *instants: datetime.datetime) -> bool:
    """Whether the policy has no windows, or one is open at any of ``instants`` (a step's start and end: the operator
    decided somewhere between)."""
    return any(window is None or window.open for window in (policy.window(at) for at in instants))


def policy(state: State, name: str) -> model.Policy | None:
    """The policy of that name in ``state``, None when it does not exist there."""
    return next((p for p in policies(state) if p.name == name), None)


def governed_by(state: State, node_name: str) -> tuple[str, ...]:
    """The policies governing the node: those selecting it, and the one its holder took it under."""
    node = state.nodes.get(node_name)
    return _governing(policies(state), node) if node is not None else ()


def _governing(every: list[model.Policy], node: Mapping[str, Any]) -> tuple[str, ...]:
    """Those selecting the node, and the one recorded on it when it was taken: a held node relabelled out of its pool
    still counts against that policy's limits and keeps its rules. Said here as an admin reckons it, not read from
    ``policy.model.governing``: the promise must not share the code it judges."""
    recorded = policy_of(dict(node))
    return tuple(sorted({p.name for p in every if p.selects(node) or p.name == recorded}))


def recovering(state: State, policy: str) -> list[str]:
    """The nodes the policy's status lists as recovering (their workloads not healthy yet)."""
    body = state.policies.get(policy) or {}
    return [str(e["node"]) for e in (body.get("status") or {}).get("recovering") or ()]


@dataclass(frozen=True)
class Scope:
    """One limit's count: a policy's whole pool, or one topology domain (label value) of it."""

    where: str  # as an admin names it: "NodeMaintenancePolicy p", "NodeMaintenancePolicy p, topology domain zone=a"
    size: int  # its selected nodes: what a percentage is of
    in_maintenance: tuple[str, ...]  # held, or recovering
    unavailable: tuple[str, ...]
    max_parallel: int | None
    max_unavailable: int | None

    def over(self, *, unavailable: bool = True) -> list[str]:
        """What this count breaks, worded for an admin (empty: within its limits); ``unavailable`` False leaves
        maxUnavailable out."""
        found = []
        if self.max_parallel is not None and len(self.in_maintenance) > self.max_parallel:
            found.append(f"{self.where}: {len(self.in_maintenance)} nodes in maintenance ({', '.join(self.in_maintenance)}), "
                         f"maxParallel allows {self.max_parallel} of its {self.size} nodes")
        if unavailable and self.max_unavailable is not None and len(self.unavailable) > self.max_unavailable:
            found.append(f"{self.where}: {len(self.unavailable)} nodes unavailable ({', '.join(self.unavailable)}), "
                         f"maxUnavailable allows {self.max_unavailable} of its {self.size} nodes")
        return found

    def room(self, node_name: str) -> bool:
        """Whether taking the node keeps this count within its limits (an unavailable node adds nothing to maxUnavailable;
        "" for a node that would)."""
        parallel = self.max_parallel is None or len(self.in_maintenance) + 1 <= self.max_parallel
        adds = 0 if node_name in self.unavailable else 1
        return parallel and (self.max_unavailable is None or len(self.unavailable) + adds <= self.max_unavailable)


def scopes(state: State, policy: model.Policy, node_name: str, given_back: Iterable[str] = ()) -> list[Scope]:
    """The counts whose limits apply to the node under ``policy``: its pool, and each topology domain the node is in
    (a node without a topology key's label is in none of its domains). ``given_back``: nodes recovering under the
    policy as the history shows them (``simulation.given_back``), counted besides those its status lists."""
    every = policies(state)
    selected = {name: n for name, n in state.nodes.items() if policy.name in _governing(every, n)}
    held = {name for name in selected if state.holder(name)}
    listed = sorted({*recovering(state, policy.name), *given_back} - held)
    down = held | {name for name, n in selected.items() if model.unavailable(n)}
    found = [_scope(f"NodeMaintenancePolicy {policy.name}", selected, held, listed, down, policy.max_parallel, policy.max_unavailable)]
    for limit in policy.topology:
        value = _label(state.nodes.get(node_name), limit.key)
        if value is None:
            continue
        domain = {name: n for name, n in selected.items() if _label(n, limit.key) == value}
        in_domain = [name for name in listed if _label(state.nodes.get(name), limit.key) == value]
        found.append(_scope(f"NodeMaintenancePolicy {policy.name}, topology domain {limit.key}={value}", domain, held & domain.keys(),
                            in_domain, down & domain.keys(), limit.max_parallel, limit.max_unavailable))
    return found


def _label(node: Mapping[str, Any] | None, key: str) -> str | None:
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    return str(labels[key]) if key in labels else None


def _scope(where: str, selected: Mapping[str, Any], held: set[str], listed: list[str], down: set[str],
           max_parallel: int | str | None, max_unavailable: int | str | None) -> Scope:
    return Scope(where=where, size=len(selected), in_maintenance=tuple(sorted(held | set(listed))), unavailable=tuple(sorted(down)),
                 max_parallel=model.resolve(max_parallel, len(selected)), max_unavailable=model.resolve(max_unavailable, len(selected)))
