"""Decisions of one drain, as pure functions: which pods go, in what order, under which budgets, and the status that says so."""
