"""A node held under a policy this operator never saw: what an operator started again can tell of a policy deleted before.

The grace a deleted policy keeps (``runtime.policies.watches``) lives in memory only, so an operator started again knows
nothing of a policy deleted before. What it can see is a node held under a policy that does not exist (the node records
the policy it was taken under): a replace under way, or a deletion it missed, it cannot tell which, so for
DEPARTED_GRACE_SECONDS from its first listing the policies count as unknown (no node is taken, and that node's drain,
which has no rules to keep, removes nothing), and the maintenances say why. A policy deleted before the operator's first
listing (while it was down, or while it started and its first listings failed) with no node held under it leaves
nothing to tell it by: its line goes unpaced for the replace's own gap (about a second). The maintenances' own statuses
are no evidence: the drains rewrite them as soon as they start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from node_maintenance.drain.nodes import holder_of, policy_of

# How long a policy deleted still paces and protects what it governs: many times the gap of a replace, short enough
# that a deliberate delete frees its line soon. Counted on the event loop's monotonic clock (a jump of the wall clock
# neither ends nor prolongs it).
DEPARTED_GRACE_SECONDS = 30.0


class UnseenPolicy:
    """Whether a held node names a policy never seen since the start, within the grace of the first listing."""

    def __init__(self, nodes: Callable[[], Iterable[Mapping[str, Any]]], changed_all: Callable[[], None]) -> None:
        """``nodes``: the nodes as their watch shows them now; ``changed_all`` tells everyone when the grace ends."""
        self.nodes = nodes
        self.changed_all = changed_all
        self._ever_seen: set[str] = set()  # the names of every policy listed or watched since the start
        self._why: str | None = None  # why a held node's policy is missing ("" none; None: not looked at since a change)
        self._node = ""  # the node that says so
        self._first_known: float | None = None  # when every watch had first listed, on the loop's clock
        self._grace: asyncio.TimerHandle | None = None  # tells everyone when the first listing's grace ends

    def stop(self) -> None:
        if self._grace is not None:
            self._grace.cancel()

    def saw(self, names: Iterable[str]) -> None:
        """Policies of these names exist: listed or watched."""
        self._ever_seen.update(names)

    def why(self) -> str:
        """Within DEPARTED_GRACE_SECONDS of the first listing, why a node is held under a policy that does not exist and
        that this operator never saw ("" when none is): deleted before it started, maybe by a replace whose new object
        comes in a moment. Looked at again only after a change of that node or of a policy while one is found (once none
        is, a node can only be taken under a policy that exists)."""
        loop = asyncio.get_running_loop()
        if self._first_known is None:
            self._first_known = loop.time()
        elif loop.time() - self._first_known >= DEPARTED_GRACE_SECONDS:
            return ""
        if self._why is None:
            node, recorded = next(((n["metadata"]["name"], recorded) for n in self.nodes() if (recorded := self.never_seen(n))), ("", ""))
            self._node = node
            self._why = (f"node {node} is held under NodeMaintenancePolicy {recorded}, which does not exist: created again by "
                         f"a replace, it governs at once; else nothing waits for it after {DEPARTED_GRACE_SECONDS:.0f}s from the "
                         "operator's start") if node else ""
            if self._why and self._grace is None:
                self._grace = loop.call_at(self._first_known + DEPARTED_GRACE_SECONDS, self._grace_ended)
        return self._why

    def never_seen(self, node: Mapping[str, Any]) -> str | None:
        """The policy a held node records when none of its name was seen since the start (those that exist, and those
        deleted within their grace, all were); None otherwise. Its holder has no rules last read to keep while the
        policies are unknown. Asked at every drain step: a set lookup."""
        recorded = policy_of(dict(node)) if holder_of(dict(node)) else None
        if recorded is None or recorded in self._ever_seen:
            return None
        return recorded

    def _grace_ended(self) -> None:
        if self._why:
            self._why = ""
            self.changed_all()

    def cleared(self, node: str | None = None) -> bool:
        """After a change of a policy, or of ``node``: whether the missing policy a held node named is no longer missing
        (everyone may go on, and is told). A change of another node changes nothing of it."""
        if not self._why or node not in (None, self._node):
            return False
        self._why = None
        return not self.why()
