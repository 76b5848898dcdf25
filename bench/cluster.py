"""The local control plane as the benchmark needs it: every request of the two clients compared is
audited, so their API cost is counted by verb and resource, and so is each budget status the disruption
controller writes (when a budget allows an eviction again); plus an admin client on the event loop."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from devcluster.cluster import Cluster
from node_maintenance.client.async_http import AsyncKube
from node_maintenance.client.config import load_credentials

OPERATOR_USER = "system:serviceaccount:node-maintenance-operator:node-maintenance-operator"
KUBECTL_NAMESPACE, KUBECTL_ACCOUNT = "bench", "kubectl-drain"
KUBECTL_USER = f"system:serviceaccount:{KUBECTL_NAMESPACE}:{KUBECTL_ACCOUNT}"
# The controller manager runs each controller under a ServiceAccount of its own (--use-service-account-credentials).
DISRUPTION_CONTROLLER_USER = "system:serviceaccount:kube-system:disruption-controller"


# A production control plane raises its controllers' client limits above the defaults (20 requests a
# second, bursts of 30, 5 workers, 1 for budgets), or many drains at once wait on how fast the
# ReplicaSet controller may create replacements, the scheduler bind them and the disruption
# controller count them, not on the operator.
CONTROL_PLANE_FLAGS = {
    "kube-controller-manager": ("--kube-api-qps=200", "--kube-api-burst=400", "--concurrent-deployment-syncs=20",
                                "--concurrent-replicaset-syncs=20", "--concurrent-statefulset-syncs=20",
                                "--concurrent-disruption-syncs=20"),
    "kube-scheduler": ("--kube-api-qps=200", "--kube-api-burst=400"),
}


class BenchCluster(Cluster):
    """A Cluster whose audit log holds every request of the operator and of the `kubectl drain` user,
    with its controllers tuned as in production (``CONTROL_PLANE_FLAGS``, stated in the report)."""

    component_flags = CONTROL_PLANE_FLAGS

    def _write_audit_policy(self) -> Path:
        policy = {
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            # A watch is logged when it starts (ResponseStarted); every other request once, when answered.
            "omitStages": ["RequestReceived"],
            # A budget's status update names the version it replaced (objectRef.resourceVersion): the update that
            # made the version a client saw is the one that replaced the version before it.
            "rules": [{"level": "Metadata", "users": [OPERATOR_USER, KUBECTL_USER]},
                      {"level": "Metadata", "users": [DISRUPTION_CONTROLLER_USER], "verbs": ["update"],
                       "resources": [{"group": "policy", "resources": ["poddisruptionbudgets/status"]}]},
                      {"level": "None"}],
        }
        path = self.workdir / "audit-policy.yaml"
        path.write_text(yaml.safe_dump(policy))
        return path

    def admin(self) -> AsyncKube:
        return AsyncKube(load_credentials(str(self.kubeconfig)))

    def kubectl_drain_kubeconfig(self) -> Path:
        """A cluster-admin ServiceAccount used only by `kubectl drain`, so its requests can be told apart."""
        path = self.service_account_kubeconfig(KUBECTL_NAMESPACE, KUBECTL_ACCOUNT)
        self.kubectl("create", "clusterrolebinding", "bench-kubectl-drain", "--clusterrole=cluster-admin",
                     f"--serviceaccount={KUBECTL_NAMESPACE}:{KUBECTL_ACCOUNT}", check=False)
        return path


class AuditCounter:
    """Counts requests per user from the audit log, between two marks (the log is read incrementally).

    The API server's log writer starts a new file once one reaches its size limit (100 MB unless
    --audit-log-maxsize says otherwise), renaming the full one beside it: a mark is the file (by inode) and the
    offset in it, and what was logged since is the rest of that file and every file written after it."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.inode, self.offset = 0, 0

    def mark(self) -> None:
        """Skip everything logged so far."""
        if self.log.exists():
            stat = self.log.stat()
            self.inode, self.offset = stat.st_ino, stat.st_size

    def _files(self) -> list[Path]:
        """The log's files, oldest first: the ones set aside (named after the log, with the time they were), then the log."""
        aside = sorted(self.log.parent.glob(f"{self.log.stem}-*{self.log.suffix}"), key=lambda path: path.stat().st_mtime)
        return [*aside, *([self.log] if self.log.exists() else [])]

    def events(self) -> list[dict[str, Any]]:
        """Every event logged since the mark (up to the last whole line: the API server may be writing one)."""
        files = self._files()
        start = next((i for i, path in enumerate(files) if path.stat().st_ino == self.inode), None)
        data = b""
        for i, path in enumerate(files[start or 0:] if start is not None else files):
            with path.open("rb") as handle:
                handle.seek(self.offset if start is not None and i == 0 else 0)
                data += handle.read()
        return [json.loads(line) for line in data[:data.rfind(b"\n") + 1].splitlines() if line.strip()]

    def on_objects(self, user: str, resource: str, verbs: tuple[str, ...] = ("get", "patch", "update", "delete")) -> list[tuple[str, str]]:
        """The requests of ``user`` logged since the mark on single objects of ``resource`` (any subresource), with one
        of ``verbs``, as (the object's name, when the request came, RFC 3339 in UTC), in the log's order."""
        return [(ref["name"], event.get("requestReceivedTimestamp", "")) for event in self.events()
                if event.get("user", {}).get("username") == user and event.get("stage") == "ResponseComplete" and event.get("verb") in verbs
                and (ref := event.get("objectRef") or {}).get("resource") == resource and ref.get("name")]

    def since_mark(self, user: str, *, before: str | None = None, after: str | None = None) -> Counter[str]:
        """Requests of ``user`` logged since the mark, keyed "verb resource[/subresource]" (429s as "... refused"); only
        those that came ``before`` or ``after`` a time (RFC 3339 in UTC, as the audit log stamps them), when given."""
        counts: Counter[str] = Counter()
        for event in self.events():
            if event.get("user", {}).get("username") != user:
                continue
            came = event.get("requestReceivedTimestamp", "")
            if (before is not None and came >= before) or (after is not None and came < after):
                continue
            verb = event.get("verb", "")
            if (verb == "watch") != (event.get("stage") == "ResponseStarted"):
                continue  # each request once: a watch when it starts, the rest when answered
            ref = event.get("objectRef") or {}
            resource = ref.get("resource", event.get("requestURI", "?"))
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            key = f"{verb} {resource}"
            if (event.get("responseStatus") or {}).get("code") == 429:
                key += " refused"
            counts[key] += 1
        return counts
