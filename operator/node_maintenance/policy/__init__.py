"""NodeMaintenancePolicy decisions, as pure functions: which policy governs a node, who gets a slot, the hook Jobs."""
