"""kubectl nm without a cluster: its inputs, its plan, what it prints and the exit codes scripts rely on."""

from __future__ import annotations

import datetime
import io
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from node_maintenance_cli import commands, inputs, main, plan, views
from node_maintenance_cli.errors import CliError, Exit
from tests.unit import builders


# ---------------------------------------------------------------- selectors and durations as kubectl writes them
@pytest.mark.parametrize(
    "text, selector",
    [
        ("app=web", {"matchLabels": {"app": "web"}}),
        ("app==web,tier=front", {"matchLabels": {"app": "web", "tier": "front"}}),
        ("tier!=db", {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}),
        ("env in (prod, staging)", {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "staging"]}]}),
        ("env notin (dev)", {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}),
        ("gpu,!legacy", {"matchExpressions": [{"key": "gpu", "operator": "Exists"}, {"key": "legacy", "operator": "DoesNotExist"}]}),
        ("example.com/pool=infra,app in (a,b)", {"matchLabels": {"example.com/pool": "infra"},
                                                 "matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}),
    ],
)
def test_label_selectors_become_label_selector_objects(text: str, selector: dict[str, Any]) -> None:
    assert inputs.label_selector(text) == selector


@pytest.mark.parametrize("text", ["", "app=web,", "env in ()", "env in (a", "a>1", "=web"])
def test_malformed_selectors_are_refused_with_the_syntax(text: str) -> None:
    with pytest.raises(ValueError, match=r"key=value|inside the parentheses"):
        inputs.label_selector(text)


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("10m", 600), ("1h30m", 5400), ("2h", 7200), ("0", 0)])
def test_durations(text: str, seconds: int) -> None:
    assert inputs.duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "10 m", "1.5h", "m", "-5", "5d"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        inputs.duration_seconds(text)


# ---------------------------------------------------------------- the plan
pod = partial(builders.pod, uid="uid-{name}", labels={}, annotations={})
budget = partial(builders.budget, generation=1, observed=1)


def node_scene() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    node_pods = [
        pod("web-1", labels={"app": "web"}), pod("web-2", labels={"app": "web"}),
        pod("solo", owner=None, labels={"app": "solo"}),
        pod("agent", owner="DaemonSet"),
        pod("static", owner=None, annotations={"kubernetes.io/config.mirror": "x"}),
        pod("job", owner="Job", phase="Succeeded", labels={"app": "solo"}),
    ]
    budgets = [
        budget("web", labels={"app": "web"}, minAvailable=1, allowed=1, healthy=2, desired=1, expected=2),
        budget("solo", labels={"app": "solo"}, minAvailable=1, allowed=0, healthy=1, desired=1, expected=1),
    ]
    return node_pods, budgets


def test_plan_says_what_goes_what_stays_and_what_blocks() -> None:
    node_pods, budgets = node_scene()
    document = plan.build("n1", node_pods, budgets, node_pods)
    rows = {r["name"]: r for r in document["pods"]}
    assert {n: r["action"] for n, r in rows.items()} == {
        "web-1": "evict", "web-2": "evict", "solo": "evict", "agent": "stay", "static": "stay", "job": "delete"}
    assert "DaemonSet" in rows["agent"]["why"] and "mirror" in rows["static"]["why"]
    assert rows["job"]["blockedBy"] == []  # finished pods are deleted, no budget is asked
    assert [b["kind"] for b in rows["solo"]["blockedBy"]] == ["structural"]
    assert [b["kind"] for b in rows["web-1"]["blockedBy"]] == ["temporary"]
    assert [(b["budgets"], b["kind"], b["pods"]) for b in document["blockers"]] == [
        (["ns/solo"], "structural", ["ns/solo"]), (["ns/web"], "temporary", ["ns/web-1", "ns/web-2"])]
    assert document["summary"] == {"evict": 3, "delete": 1, "stay": 2, "blockedStructurally": 1, "blockedTemporarily": 2}
    assert document["drainable"] is False
    json.dumps(document)  # what -o json prints


def test_plan_honours_the_pod_selector_like_the_operator() -> None:
    node_pods, budgets = node_scene()
    document = plan.build("n1", node_pods, budgets, node_pods, {"matchLabels": {"app": "web"}})
    rows = {r["name"]: r for r in document["pods"]}
    assert rows["solo"]["action"] == "stay" and rows["solo"]["rule"] == "unselected"
    assert document["drainable"] is True and [b["budgets"] for b in document["blockers"]] == [["ns/web"]]


def test_plan_reads_daemonsets_as_the_operator_does() -> None:
    node_pods = [pod("agent", owner="DaemonSet", owner_name="agent"), pod("orphan", owner="DaemonSet", owner_name="gone"),
                 pod("spent", owner="DaemonSet", owner_name="agent", phase="Failed"), pod("hidden", owner="DaemonSet", owner_name="secret")]
    document = plan.build("n1", node_pods, [], node_pods, daemonsets={"ns/agent": True, "ns/gone": False})
    assert {r["name"]: (r["action"], r["rule"]) for r in document["pods"]} == {
        "agent": ("stay", "daemonset"), "orphan": ("evict", "evict"), "spent": ("delete", "finished"), "hidden": ("stay", "daemonset-unknown")}


# ---------------------------------------------------------------- what people read
NOW = datetime.datetime(2025, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)


@pytest.mark.parametrize("stamp, shown", [("2025-01-01T11:59:15Z", "45s"), ("2025-01-01T11:48:00Z", "12m"),
                                          ("2025-01-01T07:00:00Z", "5h"), ("2024-12-29T12:00:00Z", "3d")])
def test_age_like_kubectl(stamp: str, shown: str) -> None:
    assert views.age(stamp, NOW) == shown


nm = partial(builders.nm, name="n1", created="2025-01-01T11:59:00Z", reason="NIC")


def test_summary_reads_the_status_and_names_a_deletion() -> None:
    running = nm(status={"phase": "Running", "drainProgress": 40, "evictionPods": 5,
                         "pendingPodsRefs": [{"namespace": "ns", "name": f"p{i}"} for i in range(3)], "lastError": "ns/p0 waits"})
    row = views.summary(running, NOW)
    assert (row["phase"], row["progress"], row["pending"], row["evictionPods"], row["lastError"]) == ("Running", 40, 3, 5, "ns/p0 waits")
    assert views.summary(nm(), NOW)["phase"] == "Pending"
    stopping = nm(status={"phase": "Succeeded"})
    stopping["metadata"]["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    assert views.summary(stopping, NOW)["phase"] == "Stopping"


def test_status_table_and_plan_render_with_rich() -> None:
    out = views.Console(width=200, record=True, force_terminal=False)
    out.print(views.status_table([nm(status={"phase": "Running", "drainProgress": 40, "lastError": "waits on ns/web"})], NOW))
    node_pods, budgets = node_scene()
    out.print(views.plan_view(plan.build("n1", node_pods, budgets, node_pods)))
    text = out.export_text()
    assert "Running" in text and "40%" in text and "waits on ns/web" in text
    assert "structural: ns/solo" in text and "cannot finish" in text


# ---------------------------------------------------------------- verbs and exit codes, with a stand-in cluster
class FakeCluster:
    def __init__(self, *maintenances: dict[str, Any], nodes: tuple[str, ...] = ("n1",), policies: tuple[dict[str, Any], ...] = ()) -> None:
        self.items = {m["metadata"]["name"]: m for m in maintenances}
        self.nodes = nodes
        self.policy_objects = list(policies)
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []

    def node(self, name: str) -> dict[str, Any]:
        if name not in self.nodes:
            raise CliError(Exit.NOT_FOUND, f"node {name} not found")
        return {"metadata": {"name": name}}

    def maintenances(self) -> list[dict[str, Any]]:
        return list(self.items.values())

    def maintenance(self, name: str) -> dict[str, Any] | None:
        return self.items.get(name)

    def create_maintenance(self, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append(body)
        self.items[body["metadata"]["name"]] = body
        return body

    def delete_maintenance(self, name: str) -> bool:
        self.deleted.append(name)
        return self.items.pop(name, None) is not None

    # The node's pods and their budgets, for plan: node_scene's.
    def pods_on(self, node: str) -> list[dict[str, Any]]:
        return node_scene()[0]

    def pods_in(self, namespace: str) -> list[dict[str, Any]]:
        return [p for p in node_scene()[0] if p["metadata"]["namespace"] == namespace]

    def budgets_in(self, namespace: str) -> list[dict[str, Any]]:
        return [b for b in node_scene()[1] if b["metadata"]["namespace"] == namespace]

    def daemonsets_exist(self, keys: object) -> dict[str, bool]:
        return {}

    def policies(self) -> list[dict[str, Any]]:
        return self.policy_objects


def run(cluster: FakeCluster, *argv: str) -> int:
    args = main.build_parser().parse_args(list(argv))
    try:
        return int(args.run(cluster, args))
    except CliError as error:
        return int(error.code)


def test_start_builds_the_v1beta1_object_from_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster()
    assert run(cluster, "start", "n1", "--reason", "Replace the NIC", "--pod-selector", "app=web", "--timeout", "10m",
               "--grace-period", "30", "-o", "json") == Exit.OK
    assert cluster.created == [{
        "apiVersion": "nodemaintenance.kubevirt.io/v1beta1", "kind": "NodeMaintenance", "metadata": {"name": "n1"},
        "spec": {"nodeName": "n1", "reason": "Replace the NIC",
                 "drain": {"podSelector": {"matchLabels": {"app": "web"}}, "timeoutSeconds": 600, "gracePeriodSeconds": 30}}}]
    assert json.loads(capsys.readouterr().out)["spec"]["nodeName"] == "n1"


def test_start_refuses_a_node_already_in_maintenance_and_creates_nothing() -> None:
    cluster = FakeCluster(nm(name="other", node="n1"))
    assert run(cluster, "start", "n1", "--reason", "x") == Exit.CONFLICT
    assert cluster.created == []


def test_start_on_a_missing_node_is_not_found() -> None:
    assert run(FakeCluster(), "start", "nope", "--reason", "x") == Exit.NOT_FOUND


def test_start_wait_ends_with_the_maintenance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands, "POLL_SECONDS", 0)
    cluster = FakeCluster()
    real_create = cluster.create_maintenance

    def failing(body: dict[str, Any]) -> dict[str, Any]:
        return real_create({**body, "status": {"phase": "Failed", "lastError": "drain timed out"}})

    cluster.create_maintenance = failing  # type: ignore[method-assign]
    assert run(cluster, "start", "n1", "--reason", "x", "--wait", "-o", "json") == Exit.NOT_DRAINED


def test_wait_timeout_is_exit_code_4(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands, "POLL_SECONDS", 0.01)
    cluster = FakeCluster()
    code = run(cluster, "start", "n1", "--reason", "x", "--wait", "--wait-timeout", "1", "-o", "json")
    assert code == Exit.NOT_DRAINED


def test_stop_deletes_every_maintenance_of_the_node_and_reports_them(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster(nm(name="a", node="n1"), nm(name="b", node="n1"), nm(name="c", node="n2"))
    assert run(cluster, "stop", "n1", "--wait", "-o", "json") == Exit.OK
    assert cluster.deleted == ["a", "b"]
    assert json.loads(capsys.readouterr().out) == {"node": "n1", "deleted": ["a", "b"], "gone": True}


def test_stop_and_status_of_a_node_not_in_maintenance_are_not_found() -> None:
    assert run(FakeCluster(), "stop", "n1") == Exit.NOT_FOUND
    assert run(FakeCluster(), "status", "n1") == Exit.NOT_FOUND


def test_status_exit_code_tells_a_failed_maintenance(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(FakeCluster(nm(status={"phase": "Succeeded"})), "status", "-o", "yaml") == Exit.OK
    assert run(FakeCluster(nm(status={"phase": "Failed"})), "status", "n1") == Exit.NOT_DRAINED
    capsys.readouterr()
    assert run(FakeCluster(), "status", "-o", "json") == Exit.OK
    assert json.loads(capsys.readouterr().out) == {"apiVersion": "v1", "kind": "List", "items": []}


@pytest.mark.parametrize("argv", [["start", "n1"], ["plan"], ["status", "--output", "xml"], ["start", "n1", "--reason", "x", "--timeout", "soon"]])
def test_usage_errors_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main.main(argv)
    assert exited.value.code == Exit.USAGE


def test_plan_escalation_shows_the_steps_of_the_nodes_maintenance_or_of_a_would_be_drain(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(FakeCluster(), "plan", "n1", "--escalation") == Exit.NOT_FOUND  # nothing to read the steps from
    steps = [{"afterSeconds": 300, "action": "DeletePods"}]
    cluster = FakeCluster(nm(name="mine", node="n1", drain={"escalation": steps}, status={"drainStartTime": "2026-01-01T10:00:00Z"}))
    run(cluster, "plan", "n1", "--escalation", "-o", "json")
    (step,) = json.loads(capsys.readouterr().out)["escalation"]
    assert (step["action"], step["at"]) == ("DeletePods", "2026-01-01T10:05:00Z") and step["pods"]
    assert all(p["budget"] for p in step["pods"])  # each held by a budget, which it bypasses
    run(FakeCluster(), "plan", "n1", "--escalation", "2m:ForceDeletePods", "-o", "json")
    (step,) = json.loads(capsys.readouterr().out)["escalation"]
    assert (step["action"], step["afterSeconds"], step["at"]) == ("ForceDeletePods", 120, None)
    assert {p["gracePeriodSeconds"] for p in step["pods"]} == {0}


def test_plan_escalation_shows_the_ladder_the_policy_selecting_the_node_caps(capsys: pytest.CaptureFixture[str]) -> None:
    steps = [{"afterSeconds": 300, "action": "DeletePods"}, {"afterSeconds": 600, "action": "ForceDeletePods"}]
    capping = FakeCluster(nm(name="mine", node="n1", drain={"escalation": steps}), policies=(builders.nm_policy("rolling", drain={"maxEscalation": "DeletePods"}),))
    run(capping, "plan", "n1", "--escalation", "-o", "json")
    assert [step["action"] for step in json.loads(capsys.readouterr().out)["escalation"]] == ["DeletePods"]
    # A would-be drain's steps are capped the same.
    run(FakeCluster(policies=tuple(capping.policy_objects)), "plan", "n1", "--escalation", "5m:DeletePods,10m:ForceDeletePods", "-o", "json")
    assert [step["action"] for step in json.loads(capsys.readouterr().out)["escalation"]] == ["DeletePods"]


# ---------------------------------------------------------------- what the cluster says is shown, never obeyed
# Markup rich would read, an escape sequence setting the terminal's title, a hyperlink, a CSI that clears the screen,
# and the C1 form of CSI: anyone who can write a status, a reason or a node annotation can put these there.
MARKUP = "[/x] [bold red]alarm[/]"
ESCAPES = "\x1b]0;pwned\x07 \x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ \x1b[2J\x9b31m"
HOSTILE = f"{MARKUP} {ESCAPES}"


def _control_characters(text: str) -> set[str]:
    return {c for c in text if (ord(c) < 32 and c != "\n") or 127 <= ord(c) < 160}


@pytest.mark.parametrize("hostile", [MARKUP, ESCAPES, HOSTILE], ids=["markup", "escapes", "both"])
def test_status_shows_markup_and_escape_sequences_from_the_cluster_as_inert_text(hostile: str, capsys: pytest.CaptureFixture[str]) -> None:
    maintenance = nm(name="n1", reason=hostile, status={"phase": "Failed", "lastError": hostile + "\nsecond line"})
    assert run(FakeCluster(maintenance), "status") == Exit.NOT_DRAINED
    out = capsys.readouterr().out
    assert not _control_characters(out), repr(out)
    assert (MARKUP in out or MARKUP not in hostile) and "second line" in out


def test_plan_shows_a_holder_annotation_as_inert_text() -> None:
    node_pods, budgets = node_scene()
    out = views.Console(width=400, record=True, force_terminal=False)
    out.print(views.plan_view(plan.build("n1", node_pods, budgets, node_pods, holder=HOSTILE)))
    text = out.export_text()
    assert not _control_characters(text) and "already in maintenance by NodeMaintenance [/x] [bold red]alarm[/]" in text, text


def test_waiting_and_the_error_it_ends_with_print_no_escape_sequence(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(commands, "POLL_SECONDS", 0)
    cluster = FakeCluster()
    real_create = cluster.create_maintenance
    cluster.create_maintenance = lambda body: real_create({**body, "status": {"phase": "Failed", "lastError": HOSTILE}})  # type: ignore[method-assign]
    monkeypatch.setattr(main, "Cluster", lambda *_: cluster)
    assert main.main(["start", "n1", "--reason", HOSTILE, "--wait"]) == Exit.NOT_DRAINED
    captured = capsys.readouterr()
    assert not _control_characters(captured.out + captured.err), captured
    assert "Failed: [/x] [bold red]alarm[/]" in captured.err


def test_a_proxy_url_with_credentials_is_printed_without_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "main",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443", "proxy-url": "https://admin:s3cret@proxy.example:3128"}}],
        "users": [{"name": "u", "user": {"token": "t"}}], "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
    }))
    assert main.main(["status", "--kubeconfig", str(config)]) == Exit.CLUSTER
    err = capsys.readouterr().err
    assert "s3cret" not in err and "admin" not in err and "https://***@proxy.example:3128" in err, err


def test_the_live_wait_view_on_a_terminal_shows_the_cluster_inert() -> None:
    screen = io.StringIO()
    with views.WaitView(views.Console(file=screen, force_terminal=True, width=400), f"NodeMaintenance {HOSTILE}: draining") as view:
        view.update(50, f"Running: {HOSTILE}")
    shown = screen.getvalue()
    assert "[/x] [bold red]alarm[/]" in shown
    assert not [sequence for sequence in ("\x1b]", "\x07", "\x1b[2J", "\x9b") if sequence in shown], repr(shown)
