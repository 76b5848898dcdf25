"""`make demo`: the operator installed by OLM from our images drains a node of a local cluster and hands it back."""
