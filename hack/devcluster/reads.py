"""`kubectl get … -o json`, answered in this process through the official client, with kubectl's answer.

The tests read the cluster thousands of times while they wait (``waiting.polls``), and every kubectl costs about 70 ms
of CPU before it sends a byte (its Go runtime, its kubeconfig, its discovery cache): on two cores, more than the API
servers spend answering. The client's discovery (``kubernetes.dynamic``) resolves the resource as kubectl does (plural,
singular, short name or kind, with ``.group`` or ``.version.group``), and the answer is kubectl's: the object or a
``List`` as JSON, or its exit code 1 with the server's reason. Any other shape of ``get`` (another output, several
names, ``type/name``) is not answered here (None): kubectl itself runs.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

# The flags answered here, with a value and without.
_VALUED = {"-n": "namespace", "--namespace": "namespace", "-l": "label_selector", "--selector": "label_selector",
           "--field-selector": "field_selector", "-o": "output", "--output": "output"}
_ALONE = {"-A": "all_namespaces", "--all-namespaces": "all_namespaces"}
# Seconds a read may take, kubectl's own bound in ``Cluster.kubectl``: past it, kubectl itself is asked.
TIMEOUT_SECONDS = 120


def parse(args: tuple[str, ...]) -> dict[str, Any] | None:
    """The read ``get`` ``args`` ask for: resource, name, namespace, selectors; None for a shape not answered here."""
    if not args or args[0] != "get":
        return None
    read: dict[str, Any] = {"names": []}
    rest = list(args[1:])
    while rest:
        arg = rest.pop(0)
        key, eq, value = arg.partition("=")
        if key in _VALUED:
            if not eq:
                if not rest:
                    return None
                value = rest.pop(0)
            read[_VALUED[key]] = value
        elif arg in _ALONE:
            read[_ALONE[arg]] = True
        elif arg.startswith("-") or "/" in arg or "," in arg:
            return None
        else:
            read["names"].append(arg)
    if read.get("output") != "json" or not 1 <= len(read["names"]) <= 2:
        return None
    read["resource"], *names = read.pop("names")
    read["name"] = names[0] if names else None
    return read


class Reads:
    """Reads through one client of the admin kubeconfig, its discovery kept in the cluster's work directory; one at a
    time (a test's background threads read too, and the discovery cache is not theirs to share)."""

    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        from kubernetes.client import ApiClient, Configuration
        from kubernetes.config import load_kube_config
        from kubernetes.dynamic import DynamicClient

        configuration = Configuration()
        load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        configuration.retries = False  # one request, as kubectl sends: a server away is an error at once
        self.client = DynamicClient(ApiClient(configuration), cache_file=str(cache))
        self.lock = threading.Lock()

    def get(self, args: tuple[str, ...]) -> subprocess.CompletedProcess[str] | None:
        """kubectl's answer to ``args``, or None when kubectl itself is to answer them: another shape, or a server
        that did not answer (kubectl then says so in its own words, within its own bound)."""
        from kubernetes.client.exceptions import ApiException
        from kubernetes.dynamic.exceptions import DynamicApiError
        from urllib3.exceptions import HTTPError

        read = parse(args)
        if read is None:
            return None
        command = ["kubectl", *args]
        with self.lock:
            try:
                return self._get(read, command)
            except (DynamicApiError, ApiException) as error:
                if not getattr(error, "status", None):  # no answer from the server
                    return None
                return subprocess.CompletedProcess(command, 1, "", f"Error from server ({_reason(error)}): {_message(error)}\n")
            except HTTPError:
                return None

    def _get(self, read: dict[str, Any], command: list[str]) -> subprocess.CompletedProcess[str]:
        resource = self._resource(read["resource"])
        if resource is None:
            return subprocess.CompletedProcess(command, 1, "", f'error: the server doesn\'t have a resource type "{read["resource"]}"\n')
        namespace = None
        if resource.namespaced and not read.get("all_namespaces"):
            namespace = read.get("namespace") or "default"
        answer = self.client.get(resource, name=read["name"], namespace=namespace, label_selector=read.get("label_selector"),
                                 field_selector=read.get("field_selector"), serialize=False, _request_timeout=TIMEOUT_SECONDS)
        obj: dict[str, Any] = json.loads(answer.data)
        if read["name"] is None:  # kubectl lists every kind as a List, each item with its apiVersion and kind
            items = [{"apiVersion": resource.group_version, "kind": resource.kind, **item} for item in obj.get("items") or []]
            obj = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
        return subprocess.CompletedProcess(command, 0, json.dumps(obj, indent=4) + "\n", "")

    def _resource(self, text: str) -> Any:
        """The resource ``text`` names, as kubectl resolves it; None when the server has none of that name (once its
        discovery is read again: a CRD made or changed since the last reading)."""
        return self._resolved(text) or (self.client.resources.invalidate_cache() or self._resolved(text))

    def _resolved(self, text: str) -> Any:
        """Of every resource discovery lists, the one ``text`` names: ``resource``, ``resource.group`` or
        ``resource.version.group``, by plural, singular, short name or kind; of several groups, kubectl's choice (the
        core group, as for events, then the group's preferred version)."""
        name, _, qualifier = text.partition(".")
        version, _, group = qualifier.partition(".")
        wanted: list[tuple[str | None, str | None]] = [(qualifier, None)] if qualifier else [(None, None)]
        if group:  # resource.version.group, or else a group with dots in its name
            wanted.insert(0, (group, version))
        resources = [r for r in self.client.resources.search() if type(r).__name__ == "Resource" and "/" not in (r.name or "")]
        for in_group, in_version in wanted:
            shaped = [r for r in resources if (in_group is None or r.group == in_group) and (in_version is None or r.api_version == in_version)]
            for field in ("name", "singular_name", "short_names", "kind"):
                found = sorted((r for r in shaped if _matches(r, field, name)), key=lambda r: (r.group != "", not getattr(r, "preferred", False)))
                if found:
                    return found[0]
        return None


def _matches(resource: Any, field: str, name: str) -> bool:
    value = getattr(resource, field, None)
    if field == "short_names":
        return name.lower() in [short.lower() for short in value or []]
    return isinstance(value, str) and value.lower() == name.lower()


def _reason(error: Exception) -> str:
    body = _body(error)
    return str(body.get("reason") or getattr(error, "reason", "") or "Unknown")


def _message(error: Exception) -> str:
    return str(_body(error).get("message") or error)


def _body(error: Exception) -> dict[str, Any]:
    try:
        body = json.loads(getattr(error, "body", "") or "{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
