"""Coordination with other parties, as pure functions: the Lease rules, the remediation exclusion, the etcd-quorum guard."""
