"""A coordination.k8s.io Lease: who holds it, until when, and the record written to take or keep it.

One set of rules for both Leases the operator holds: the leader-election Lease of its replicas and
the per-node remediation Leases it shares with medik8s. A Lease is valid while ``renewTime`` is not in
the future and ``renewTime + leaseDurationSeconds`` is not in the past; a Lease that is not valid (or
has no holder) may be taken over, which sets ``acquireTime`` and counts a transition.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from node_maintenance.api import timestamps

API_VERSION = "coordination.k8s.io/v1"
KIND = "Lease"


def spec_of(lease: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (lease or {}).get("spec") or {}


def holder_of(lease: Mapping[str, Any] | None) -> str:
    return str(spec_of(lease).get("holderIdentity") or "")


def _span(lease: Mapping[str, Any] | None) -> tuple[datetime.datetime, datetime.datetime] | None:
    """When the Lease was last renewed and when that renewal expires; None when it was never renewed."""
    spec = spec_of(lease)
    renewed, duration = spec.get("renewTime"), spec.get("leaseDurationSeconds")
    if not renewed or duration is None:
        return None
    start = timestamps.parse(renewed)
    return start, start + datetime.timedelta(seconds=duration)


def holding(lease: Mapping[str, Any] | None, identity: str, now: datetime.datetime) -> tuple[str | None, datetime.datetime | None]:
    """The holder that owns ``lease`` now, if that is not ``identity`` (None when it may be taken or kept), and when
    the Lease expires (None: never renewed): both from one reading of its times."""
    holder = holder_of(lease)
    span = _span(lease)
    if lease is None or holder == identity or span is None or not span[0] <= now <= span[1]:
        return None, span[1] if span else None
    return holder or "an unnamed holder", span[1]


def other_holder(lease: Mapping[str, Any] | None, identity: str, now: datetime.datetime) -> str | None:
    """The holder that owns ``lease`` now, if that is not ``identity``; None when it may be taken or kept."""
    return holding(lease, identity, now)[0]


@dataclass(frozen=True)
class Observed:
    """A Lease's record as last seen to change, and when, on the reader's own monotonic clock.

    Leader election judges expiry from this, as client-go does: the holder's ``renewTime`` is written with
    the holder's clock, and a skewed clock would let a standby take a Lease its holder still renews.
    """

    record: Mapping[str, Any]  # the Lease's spec
    at: float  # local monotonic seconds when ``record`` was first seen


def observe(previous: Observed | None, lease: Mapping[str, Any] | None, clock: float) -> Observed:
    """What is known after reading ``lease`` at local time ``clock``: a changed record restarts its time."""
    record = dict(spec_of(lease))
    return previous if previous is not None and previous.record == record else Observed(record, clock)


def held_by_other(observed: Observed, identity: str, clock: float) -> bool:
    """Whether another holder owns the Lease at local time ``clock``: named, and its record changed less than
    ``leaseDurationSeconds`` ago by the reader's clock, whatever its timestamps say."""
    holder = str(observed.record.get("holderIdentity") or "")
    duration = float(observed.record.get("leaseDurationSeconds") or 0)
    return bool(holder) and holder != identity and clock < observed.at + duration


def claimed(lease: Mapping[str, Any] | None, identity: str, duration_seconds: int, now: datetime.datetime,
            metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The Lease as ``identity`` writes it to hold it from ``now``: created, taken over or renewed.

    ``metadata`` is used for a new Lease; an existing one keeps its own (its resourceVersion makes the
    write a compare-and-swap).
    """
    stamp = timestamps.micro_time(now)
    spec = dict(spec_of(lease))
    taken_over = lease is not None and (spec.get("holderIdentity") != identity or spec.get("renewTime") is None)
    spec.update(holderIdentity=identity, leaseDurationSeconds=duration_seconds, renewTime=stamp)
    if lease is None:
        spec.update(acquireTime=stamp, leaseTransitions=0)
    elif taken_over:
        spec.update(acquireTime=stamp, leaseTransitions=int(spec.get("leaseTransitions") or 0) + 1)
    kept = dict((lease or {}).get("metadata") or metadata)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": kept, "spec": spec}
