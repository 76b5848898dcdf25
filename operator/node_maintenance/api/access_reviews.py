"""The SubjectAccessReview the operator sends to ask whether someone may do something: the one body both the
admission webhooks (for an object's author) and the secured metrics (for a scraper) ask with, so both name the
user as the API server's authorizers see it, groups and extra included."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def subject_access_review(user: Mapping[str, Any], **attributes: Mapping[str, Any]) -> dict[str, Any]:
    """A review of ``user`` (``userInfo`` as an AdmissionReview or a TokenReview gives it) for ``attributes``:
    ``resourceAttributes=...`` or ``nonResourceAttributes=...``. A user named without groups is asked about as
    named, never widened: absent keys stay absent."""
    spec: dict[str, Any] = {"user": user.get("username", ""), **attributes}
    spec.update({key: user[key] for key in ("uid", "groups", "extra") if user.get(key)})
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
