"""The demo's decisions without a cluster: what it deploys, what it installs, what the transcript keeps."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from demo import install, kubevirt, workload
from demo.narrator import Narrator, rounded
from demo.progress import Drain
from devcluster.olm import DEPLOY_DIR
from devcluster.waiting import ClusterError

REGISTRY = "127.0.0.1:5000/nmo"


def test_every_workload_pod_is_meant_for_a_kwok_worker_and_bare_pods_for_the_target() -> None:
    objects = workload.objects("w1") + kubevirt.objects("w1")
    specs = [o["spec"]["template"]["spec"] if "template" in o["spec"] else o["spec"]
             for o in objects if o["kind"] in ("Pod", "Deployment", "StatefulSet", "DaemonSet")]
    assert len(specs) == 6
    for spec in specs:
        assert workload.KWOK_TOLERATION in spec["tolerations"]
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchExpressions": [{"key": workload.WORKER_ROLE, "operator": "Exists"}]}]
    assert {o["metadata"]["name"]: o["spec"].get("nodeName") for o in objects if o["kind"] == "Pod"} == {
        workload.BARE: "w1", kubevirt.SOURCE: "w1"}


def test_expected_pods_counts_replicas_daemon_pods_per_worker_and_bare_pods() -> None:
    objects = workload.objects("w1") + kubevirt.objects("w1")
    assert workload.expected_pods(objects, 4) == 3 + 2 + 2 + 4 + 1 + 1
    assert workload.expected_pods(objects, 1) == 3 + 2 + 2 + 1 + 1 + 1


def test_every_controller_is_under_a_budget_that_selects_it() -> None:
    objects = workload.objects("w1") + kubevirt.objects("w1")
    budgets = [o["spec"]["selector"]["matchLabels"] for o in objects if o["kind"] == "PodDisruptionBudget"]
    for o in objects:
        if o["kind"] in ("Deployment", "StatefulSet"):
            labels = o["spec"]["template"]["metadata"]["labels"]
            assert any(sel.items() <= labels.items() for sel in budgets), o["metadata"]["name"]


def test_the_vm_budget_holds_its_only_pod_until_a_migration_target_exists() -> None:
    _, source, budget = kubevirt.objects("w1")
    target = kubevirt.launcher(kubevirt.TARGET)
    assert budget["spec"]["minAvailable"] == 1
    selector = budget["spec"]["selector"]["matchLabels"].items()
    assert selector <= source["metadata"]["labels"].items() and selector <= target["metadata"]["labels"].items()
    assert source["metadata"]["labels"]["kubevirt.io"] == "virt-launcher" and "nodeName" not in target["spec"]


def test_deploy_manifests_are_the_committed_ones_with_the_registry_substituted() -> None:
    objects = install.manifests(REGISTRY)
    assert [o["kind"] for o in objects] == ["Namespace", "OperatorGroup", "CatalogSource", "Subscription"]
    assert objects[2]["spec"]["image"].startswith(REGISTRY + "/")
    assert objects[3]["spec"]["source"] == objects[2]["metadata"]["name"]


def test_a_stale_committed_manifest_is_refused_naming_the_file_and_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deploy = tmp_path / DEPLOY_DIR.name
    shutil.copytree(DEPLOY_DIR, deploy)
    (deploy / "nm-sub.yaml").write_text((deploy / "nm-sub.yaml").read_text().replace("channel: ", "channel: old-"))
    monkeypatch.setattr(install, "DEPLOY_DIR", deploy)
    with pytest.raises(ClusterError, match=r"olm-deploy-manifests/kubernetes/nm-sub\.yaml is stale: run `make render`"):
        install.manifests(REGISTRY)


def _row(phase: str, pending: int, error: str = "") -> dict[str, Any]:
    return {"phase": phase, "pending": pending, "lastError": error}


def test_drain_keeps_each_count_of_pods_left_once_and_each_hold_once() -> None:
    drain = Drain()
    assert drain.saw(_row("Pending", 0)) == []
    assert drain.saw(_row("Running", 9, "a waits on PodDisruptionBudget x; b waits on PodDisruptionBudget y")) == [
        "a waits on PodDisruptionBudget x", "b waits on PodDisruptionBudget y"]
    assert drain.saw(_row("Running", 9, "b waits on PodDisruptionBudget y")) == []
    drain.saw(_row("Running", 4))
    drain.saw(_row("Succeeded", 0))
    assert drain.left == [9, 4, 0]
    assert drain.holds == ["a waits on PodDisruptionBudget x", "b waits on PodDisruptionBudget y"]


def test_transcript_is_plain_and_hides_machine_details_the_screen_shows() -> None:
    screen = io.StringIO()
    narrator = Narrator(Console(file=screen, force_terminal=True, color_system="truecolor"))
    narrator.hide("/tmp/nmo-cluster-abc", "<cluster directory>")
    narrator.step("Start")
    narrator.say("took 12.34 s", transcript=f"took {rounded(12.34)}")
    narrator.block("export KUBECONFIG=/tmp/nmo-cluster-abc/admin.kubeconfig", command="echo [bold]")
    text = narrator.transcript()
    assert "\x1b" not in text and "/tmp/" not in text and "12.34" not in text
    assert "## 1. Start" in text and "took ~10 s" in text and "$ echo [bold]" in text
    assert "<cluster directory>/admin.kubeconfig" in text
    assert "\x1b" in screen.getvalue() and "/tmp/nmo-cluster-abc" in screen.getvalue()


def test_durations_round_to_five_seconds_never_to_zero() -> None:
    assert [rounded(s) for s in (0.4, 2.4, 7.6, 181)] == ["~5 s", "~5 s", "~10 s", "~180 s"]
