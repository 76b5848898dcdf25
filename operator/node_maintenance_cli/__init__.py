"""``kubectl nm``: start, stop, watch and plan node maintenance from the command line.

Installed with the package as ``kubectl-nm``, so kubectl finds it as a plugin.
"""
