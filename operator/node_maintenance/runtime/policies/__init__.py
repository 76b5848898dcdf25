"""NodeMaintenancePolicies at run time: what the drains ask (``view``), and the parts behind it, one job each."""
