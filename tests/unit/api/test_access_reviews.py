"""The SubjectAccessReview body: the user as the API server named them, and the attributes asked about."""

from __future__ import annotations

from typing import Any

import pytest

from node_maintenance.api import access_reviews

NODE_PATCH = {"verb": "patch", "resource": "nodes", "name": "worker-1"}
METRICS = {"path": "/metrics", "verb": "get"}


@pytest.mark.parametrize(("user", "attributes", "spec"), [
    ({"username": "alice", "uid": "1", "groups": ["devs", "system:authenticated"], "extra": {"scopes": ["a"]}},
     {"resourceAttributes": NODE_PATCH},
     {"user": "alice", "uid": "1", "groups": ["devs", "system:authenticated"], "extra": {"scopes": ["a"]}, "resourceAttributes": NODE_PATCH}),
    ({"username": "system:serviceaccount:monitoring:prometheus", "groups": ["system:serviceaccounts"]},
     {"nonResourceAttributes": METRICS},
     {"user": "system:serviceaccount:monitoring:prometheus", "groups": ["system:serviceaccounts"], "nonResourceAttributes": METRICS}),
    ({"username": "bob", "groups": [], "extra": {}}, {"resourceAttributes": NODE_PATCH},
     {"user": "bob", "resourceAttributes": NODE_PATCH}),  # empty keys stay absent: nothing is widened
    ({}, {"resourceAttributes": NODE_PATCH}, {"user": "", "resourceAttributes": NODE_PATCH}),
])
def test_the_review_names_the_user_as_given_and_what_is_asked(user: dict[str, Any], attributes: dict[str, Any], spec: dict[str, Any]) -> None:
    review = access_reviews.subject_access_review(user, **attributes)
    assert review == {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
