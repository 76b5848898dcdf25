"""The names an admin meets when letting people steer or watch the operator: the ClusterRoles the bundle ships, and
the verb on nodemaintenances that lets an escalation ladder delete pods past their budgets (granted on its own, as
Kubernetes grants ``escalate`` and ``bind`` on roles). The webhooks name them in refusals; the bundle renders them."""

ESCALATE_VERB = "escalate"
REQUESTER_ROLE = "node-maintenance-requester"
ESCALATOR_ROLE = "node-maintenance-escalator"
# What a scraper (Prometheus's ServiceAccount) is bound to, to read /metrics.
METRICS_READER_ROLE = "node-maintenance-metrics-reader"
