"""Where a request's path points: a resource, its namespace, an object's name and a subresource, as the API server
routes ``/api/v1/...`` and ``/apis/<group>/<version>/...``. The version is not kept: the simulation stores each
object once, as the operator writes it (in the version it works in)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from urllib.parse import unquote


@dataclass(frozen=True, order=True)
class Location:
    resource: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""

    def named(self, name: str) -> Location:
        """The object of that name in this collection."""
        return replace(self, name=name, subresource="")

    def of_object(self) -> Location:
        """The object itself, without the subresource."""
        return replace(self, subresource="")

    def holds(self, other: Location) -> bool:
        """Whether this collection (of one namespace, or of all when none is named) holds the object ``other``."""
        return (not self.name and other.resource == self.resource and not other.subresource
                and (not self.namespace or self.namespace == other.namespace))


@functools.cache
def locate(path: str) -> Location:
    """The location of an API path; raises ValueError for a path the API server would not route. Kept once worked out:
    a run asks for the same few paths hundreds of thousands of times, and a Location never changes."""
    parts = [unquote(p) for p in path.split("?", 1)[0].strip("/").split("/")]
    if parts[:1] == ["api"] and len(parts) >= 3:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        rest = parts[3:]
    else:
        raise ValueError(f"not an API path: {path}")
    if rest[0] == "namespaces" and len(rest) >= 3:
        return Location(rest[2], rest[1], *rest[3:5])
    return Location(rest[0], "", *rest[1:3])


KINDS = {"nodes": "Node", "pods": "Pod", "poddisruptionbudgets": "PodDisruptionBudget", "jobs": "Job", "leases": "Lease",
         "namespaces": "Namespace", "daemonsets": "DaemonSet", "nodemaintenances": "NodeMaintenance",
         "nodemaintenancepolicies": "NodeMaintenancePolicy", "customresourcedefinitions": "CustomResourceDefinition"}


def typed(path: str, location: Location) -> dict[str, str]:
    """The apiVersion and kind the API server gives an object created at ``path``."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    version = parts[1] if parts[0] == "api" else f"{parts[1]}/{parts[2]}"
    return {"apiVersion": version, "kind": KINDS.get(location.resource, location.resource)}
