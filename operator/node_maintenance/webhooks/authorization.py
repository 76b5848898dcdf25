"""Asking the API server whether the author of a reviewed object may do, themselves, what the object will make the
operator do (:mod:`node_maintenance.policy.authority` says what that is): one SubjectAccessReview per right, for the
user the AdmissionReview names, as the API server's own authorizers would answer that user.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node_maintenance.api import access_reviews
from node_maintenance.api.paths import SUBJECT_ACCESS_REVIEWS
from node_maintenance.client.errors import KubeError
from node_maintenance.client.protocol import BlockingKubeApi
from node_maintenance.policy.authority import Access, Need


class Unanswered(Exception):
    """The API server could not say whether the user may: the object is refused, with a message to try again."""


def allowed(kube: BlockingKubeApi, user: Mapping[str, Any], access: Access) -> bool:
    """Whether ``user`` (an AdmissionReview's ``request.userInfo``) may ``access`` (a blocking call)."""
    try:
        answer = kube.request("POST", SUBJECT_ACCESS_REVIEWS, body=access_reviews.subject_access_review(user, resourceAttributes=access.attributes()))
    except KubeError as error:
        raise Unanswered(f"could not ask the API server whether user {user.get('username', '')!r} may {access}: {error}; try again") from error
    return bool((answer.get("status") or {}).get("allowed"))


def unmet(kube: BlockingKubeApi, user: Mapping[str, Any], needs: tuple[Need, ...]) -> tuple[Need, ...]:
    """The needs ``user`` does not meet: each is met by any one of its accesses, asked in turn (blocking calls)."""
    return tuple(need for need in needs if not any(allowed(kube, user, access) for access in need.any_of))
