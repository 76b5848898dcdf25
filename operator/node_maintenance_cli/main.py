"""Entry point of ``kubectl-nm`` (``kubectl nm`` once it is on PATH)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from node_maintenance.client.credentials import Impersonation
from node_maintenance.client.redaction import redact_url

from . import commands, inputs, views
from .cluster import Cluster
from .errors import CliError

EPILOG = """exit codes:
  0  done
  1  the cluster could not be reached, refused the request or failed
  2  the command line is wrong
  3  the node, the NodeMaintenance or the NodeMaintenance API does not exist
  4  the maintenance Failed, --wait-timeout passed, or plan found a block only an admin can lift
  5  the node is already in maintenance
"""


def _selector(text: str) -> dict[str, Any]:
    try:
        return inputs.label_selector(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _duration(text: str) -> int:
    try:
        return inputs.duration_seconds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _escalation(text: str) -> list[dict[str, Any]]:
    try:
        return inputs.escalation(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _seconds(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of seconds, 0 or more")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
    common.add_argument("--context", help="kubeconfig context to use (default: its current context)")
    common.add_argument("--as", dest="as_user", metavar="USER", help="act as this user (impersonation, as kubectl's --as)")
    common.add_argument("--as-group", dest="as_groups", metavar="GROUP", action="append", default=[],
                        help="with --as: act as a member of this group; repeat for several")
    common.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table",
                        help="table for people (default), json or yaml for scripts")
    waiting = argparse.ArgumentParser(add_help=False)
    waiting.add_argument("--wait", action="store_true", help="return only once the maintenance is done")
    waiting.add_argument("--wait-timeout", type=_duration, metavar="DURATION",
                         help="with --wait: give up after this long, exit code 4 (default: wait until it is done)")
    selecting = argparse.ArgumentParser(add_help=False)
    selecting.add_argument("--pod-selector", type=_selector, metavar="SELECTOR",
                           help="drain only pods matching this label selector, e.g. 'app=web,tier!=db' (default: every pod)")

    parser = argparse.ArgumentParser(prog="kubectl nm", description="Put nodes into maintenance with the Node Maintenance Operator.",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, help_text: str, *parents: argparse.ArgumentParser) -> argparse.ArgumentParser:
        return verbs.add_parser(name, parents=[common, *parents], help=help_text, description=help_text, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)

    start = verb("start", "cordon NODE, taint it and drain it: create a NodeMaintenance", waiting, selecting)
    start.add_argument("node", metavar="NODE")
    start.add_argument("--reason", required=True, help="why, for the people reading it later")
    start.add_argument("--name", help="name of the NodeMaintenance (default: the node's name)")
    start.add_argument("--timeout", type=_duration, metavar="DURATION",
                       help="fail the maintenance if the drain takes longer, e.g. 10m (default: keep draining)")
    start.add_argument("--grace-period", type=_seconds, metavar="SECONDS", help="termination grace period of evicted pods (default: each pod's own)")
    start.set_defaults(run=commands.start)

    stop = verb("stop", "end the maintenance of NODE: delete its NodeMaintenance, the node is uncordoned", waiting)
    stop.add_argument("node", metavar="NODE")
    stop.set_defaults(run=commands.stop)

    status = verb("status", "show maintenances (of NODE only, if given)")
    status.add_argument("node", metavar="NODE", nargs="?")
    status.add_argument("-w", "--watch", action="store_true", help="follow the progress until every maintenance shown has Succeeded or Failed")
    status.set_defaults(run=commands.status)

    plan = verb("plan", "dry run: which pods a drain of NODE would evict, which stay and why, which budgets would block", selecting)
    plan.add_argument("node", metavar="NODE")
    plan.add_argument("--escalation", type=_escalation, nargs="?", const=[], metavar="STEPS",
                      help="also show which pods each escalation step would delete, and when: the steps of the node's "
                           "NodeMaintenance, or of a would-be drain given as STEPS, e.g. 5m:DeletePods,10m:ForceDeletePods")
    plan.set_defaults(run=commands.show_plan)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.as_groups and not args.as_user:
        parser.error("--as-group needs --as: name the user to act as")
    impersonation = Impersonation(args.as_user, tuple(args.as_groups)) if args.as_user else None
    try:
        return int(args.run(Cluster(args.kubeconfig, args.context, impersonation), args))
    except CliError as error:
        # The message may quote the cluster (a lastError, a server's message) and name a proxy's URL.
        print(f"kubectl nm {args.verb}: error: {redact_url(views.plain(str(error)))}", file=sys.stderr)
        return int(error.code)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
