"""The names an admin meets when letting people steer the operator: the ClusterRoles the bundle ships, and the verb on
nodemaintenances that lets an escalation ladder delete pods past their budgets (granted on its own, as Kubernetes
grants ``escalate`` and ``bind`` on roles). The webhooks name them in refusals; the bundle renders the roles."""

ESCALATE_VERB = "escalate"
REQUESTER_ROLE = "node-maintenance-requester"
ESCALATOR_ROLE = "node-maintenance-escalator"
