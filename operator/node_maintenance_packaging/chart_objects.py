"""What every object of the Helm chart carries: its metadata (Helm's labels, the release's namespace) and the template
lines a conditional object is framed by."""

from __future__ import annotations

from typing import Any

from .clusterserviceversion import DEPLOYMENT
from .helmtext import Expr, Lines
from .releases import Release

NAMESPACE = Expr("{{ .Release.Namespace }}")
END = "{{- end }}"


def labels(release: Release) -> dict[str, Any]:
    return {
        "app.kubernetes.io/name": DEPLOYMENT,
        "app.kubernetes.io/instance": Expr("{{ .Release.Name | quote }}"),
        "app.kubernetes.io/version": release.version,
        "app.kubernetes.io/managed-by": Expr("{{ .Release.Service | quote }}"),
        "helm.sh/chart": f"{DEPLOYMENT}-{release.version}",
    }


def metadata(obj: dict[str, Any], common: dict[str, Any], *, namespaced: bool = True, extra: tuple[Lines, ...] = ()) -> dict[str, Any]:
    """``obj``'s metadata with Helm's labels (``common``) beside its own, in the release's namespace when ``namespaced``,
    and ``extra`` template lines among its annotations."""
    given = {key: value for key, value in obj.get("metadata", {}).items() if key not in ("namespace", "labels")}
    annotations = given.pop("annotations", {})
    return {
        "name": given.pop("name"),
        **({"namespace": NAMESPACE} if namespaced else {}),
        "labels": {**common, **(obj.get("metadata", {}).get("labels") or {})},
        **({"annotations": {**annotations, **dict.fromkeys(extra)}} if annotations or extra else {}),
        **given,
    }


def framed(before: str | None, document: dict[str, Any], after: str | None) -> dict[Any, Any]:
    """``document`` with a template line before and after it (a condition and its end)."""
    return {**({Lines((before,)): None} if before else {}), **document, **({Lines((after,)): None} if after else {})}


def conditional(condition: str, text: str) -> str:
    """A whole template file rendered only when ``condition`` holds."""
    return f"{condition}\n{text}{END}\n"
