"""The operator's promises as code: the invariants over a history of cluster states and the operator's actions.

A deterministic simulation records a :class:`~simulation.history.History` while it runs the operator against a
simulated API server and calls :func:`simulation.invariants.violations` after every step; the soak checks the
instant ones (``simulation.holding``, ``simulation.budgets``, ``simulation.settling``) against a real cluster. Each
check returns sentences an admin would read, and an empty list when the promise holds.
"""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent  # the project's top level
