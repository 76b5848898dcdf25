"""Entry point: ``python -m node_maintenance`` (the process itself is ``runtime.main``).

Every replica serves the webhooks and probes; only the Lease holder migrates storage and reconciles.
"""

import sys

from node_maintenance.client.config import kubeconfig_paths

# kopf imports the official Kubernetes client whenever it is installed, only to recognise that client's
# objects, which this process never hands it. In a pod, keep its ~40 MiB out; with a kubeconfig, the
# client's loader reads it, and kopf's import then costs nothing more.
if kubeconfig_paths() is None:
    sys.modules.setdefault("kubernetes", None)  # type: ignore[arg-type]

from node_maintenance.runtime.main import main

if __name__ == "__main__":
    sys.exit(main())
