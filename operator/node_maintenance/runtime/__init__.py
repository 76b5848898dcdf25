"""What runs: the kopf handlers, each drain's engine and executor, the policies' watches, leader election, probes."""
