"""Entry point: ``python -m node_maintenance`` (the process itself is ``runtime.main``).

Every replica serves the webhooks and probes; only the Lease holder migrates storage and reconciles.
"""

import sys

# kopf imports the official Kubernetes client whenever it is installed (a development environment has it,
# for the tests), only to recognise that client's objects, which this process never hands it: keep its
# ~20 MiB out, so the operator weighs what it weighs in its image, which lacks it.
sys.modules.setdefault("kubernetes", None)  # type: ignore[arg-type]

from node_maintenance.runtime.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
