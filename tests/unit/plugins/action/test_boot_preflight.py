# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot_preflight action: the plan from serving_profile, real GB10 node facts, one pass on the controller."""

from __future__ import annotations

import copy
import pathlib
from typing import Any
from unittest.mock import MagicMock

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.dgxspark.cluster.plugins.action import boot_preflight, memguard_plan, serving_profile
from ansible_collections.dgxspark.cluster.plugins.module_utils import _releases
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import SETTINGS
from ansible_collections.dgxspark.cluster.tests.unit.conftest import spark3_without_weights_file
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__preflight import (
    facts as node_facts,
)
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__preflight import (
    node,
    stored_guard,
)

# inventories/spark3 as these tests' nodes have it: no weights on them (their facts report none)
SPARK3 = spark3_without_weights_file()
NO_RELEASES = {
    "directory": "/var/lib/dgxspark-cluster/releases",
    "present": False,
    "releases": [],
    "promoted": None,
    "previous": None,
    "protected_images": {},
    "problems": [],
}


def facts(releases: dict[str, Any] | None = None, **per_host: dict[str, Any]) -> dict[str, Any]:
    """test__preflight's nodes, the head with the releases it keeps (none by default)."""
    given = node_facts(**per_host)
    if "spark-head" in given:
        given["spark-head"] = {**given["spark-head"], "releases": releases or NO_RELEASES}
    return given


HOSTVARS = {
    "spark-head": {"dgxspark_rank": 0, "dgxspark_fabric_address": "198.51.100.10"},
    "spark-w1": {"dgxspark_rank": 1, "dgxspark_fabric_address": "198.51.100.11"},
    "spark-w2": {"dgxspark_rank": 2, "dgxspark_fabric_address": "198.51.100.12"},
}
GROUPS = {"dgxspark_head": ["spark-head"], "dgxspark_workers": ["spark-w1", "spark-w2"]}
TASK_VARS = {"groups": GROUPS, "hostvars": HOSTVARS, "ansible_play_hosts_all": list(HOSTVARS)}


def run(
    module: Any, args: dict[str, Any], check_mode: bool = False, task_vars: dict[str, Any] | None = None
) -> dict[str, Any]:
    task = MagicMock(Task)
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = False
    loader = DataLoader()
    action = module.ActionModule(
        task=task,
        connection=MagicMock(),
        play_context=PlayContext(),
        loader=loader,
        templar=Templar(loader=loader),
        shared_loader_obj=None,
    )
    return action.run(task_vars=dict(task_vars or TASK_VARS))


PLANNED = run(serving_profile, {"src": str(SPARK3), "hosts": list(HOSTVARS)})


def test_the_one_plan_carries_every_hosts_fabric_share() -> None:
    assert not PLANNED.get("failed"), PLANNED
    assert sorted(PLANNED["plan"]["fabric"]) == sorted(HOSTVARS)
    head = PLANNED["plan"]["fabric"]["spark-head"]
    assert head["fabric"]["address"] == "198.51.100.10"
    assert head["interfaces"] == ["enp1s0f0np0", "enp1s0f1np1"]
    assert head["settings"]["topology"] == "triangle" and head["settings"]["shape"] == "tp3-triangle"
    assert isinstance(PLANNED["started"], float)


def test_a_ready_cluster_passes_and_says_what_a_boot_would_do_in_check_mode() -> None:
    result = run(boot_preflight, {"planned": PLANNED, "facts": facts()}, check_mode=True)
    assert not result.get("failed"), result.get("msg")
    assert result["msg"][0].startswith("PASS  node-facts")
    # the plan judged is the plan that starts: built again with the nodes' names bound in
    assert [r["host"] for r in result["plan"]["ranks"]] == list(HOSTVARS)
    assert result["as_planned"] == dict.fromkeys(HOSTVARS, False)
    assert result["to_replace"] == dict.fromkeys(HOSTVARS, False)
    assert set(result["differences"]["spark-w1"]) == {"kernel", "fabric", "memory guard"}
    # the GB10 facts carry no fabric files: the fabric role would write them
    assert any("not looked at" in change for change in result["differences"]["spark-w1"]["fabric"])
    # the roles the converge enters: those with a difference on some node (no memory-guard difference is given)
    roles = ("kernel", "fabric", "memory guard")
    differing = [role for role in roles if any(d[role] for d in result["differences"].values())]
    assert "fabric" in differing and result["to_converge"] == differing
    assert "rank 1 (spark-w1): would start vllm_dsv41" in " ".join(result["would"])
    assert result["would"][-1].startswith("check mode: the plan and the preflight passed.")
    assert result["msg"][-1] == result["would"][-1]


def test_not_in_check_mode_there_is_no_would() -> None:
    result = run(boot_preflight, {"planned": PLANNED, "facts": facts()})
    assert not result.get("failed") and "would" not in result


def test_a_failed_check_fails_with_the_whole_report_and_each_failure() -> None:
    worker = node(1)
    worker["memguard"] = stored_guard()
    result = run(boot_preflight, {"planned": PLANNED, "facts": facts(**{"spark-w1": worker})})
    assert result["failed"] is True
    assert result["msg"][0].startswith("PASS  node-facts")
    assert any(line.startswith("preflight: 1 check(s) failed; nothing was changed") for line in result["msg"])
    assert any(line.startswith("guard-tripped  spark-w1") for line in result["msg"])
    cleared = run(boot_preflight, {"planned": PLANNED, "facts": facts(**{"spark-w1": worker}), "clear_trip": True})
    assert not cleared.get("failed"), cleared["msg"]


def test_a_previous_container_is_to_replace_only_when_it_does_not_serve_as_planned() -> None:
    exited = [{"name": "vllm_dsv41", "state": "exited", "labels": {}}]
    given = facts(**{"spark-w2": node(2, containers=exited)})
    refused = run(boot_preflight, {"planned": PLANNED, "facts": given})
    assert refused["failed"] is True
    assert any(line.startswith("previous-container  spark-w2") for line in refused["msg"])
    replaced = run(boot_preflight, {"planned": PLANNED, "facts": given, "replace": True})
    assert not replaced.get("failed"), replaced["msg"]
    assert replaced["to_replace"] == {"spark-head": False, "spark-w1": False, "spark-w2": True}


def test_a_node_without_facts_fails_and_unknown_skips_are_refused() -> None:
    given = facts()
    del given["spark-w2"]
    result = run(boot_preflight, {"planned": PLANNED, "facts": given})
    assert result["failed"] is True
    assert any("node-facts  spark-w2" in line for line in result["msg"])
    assert result["discovered"]["spark-w2"] is None
    unknown = run(boot_preflight, {"planned": PLANNED, "facts": facts(), "skip": ["mem"]})
    assert unknown["failed"] is True and "unknown preflight checks to skip: mem" in unknown["msg"]


def test_the_address_the_boot_connects_to_is_compared_with_the_fabric_ports() -> None:
    """Each host's ansible_host (else its inventory name) reaches the preflight: a worker managed on the address of
    a planned fabric port FAILs fabric-not-management; the others, managed on names, are compared by route."""
    worker = node(1)
    worker["fabric"]["interfaces"]["enp1s0f0np0"]["ipv4"] = ["192.0.2.11/24"]
    hostvars = {**HOSTVARS, "spark-w1": {**HOSTVARS["spark-w1"], "ansible_host": "192.0.2.11"}}
    result = run(
        boot_preflight,
        {"planned": PLANNED, "facts": facts(**{"spark-w1": worker})},
        task_vars={**TASK_VARS, "hostvars": hostvars},
    )
    assert result["failed"] is True
    assert [(f["check"], f["host"]) for f in result["failures"]] == [("fabric-not-management", "spark-w1")]
    assert "enp1s0f0np0 carries the management address 192.0.2.11" in result["failures"][0]["message"]
    head = next(line for line in result["lines"] if line["check"] == "fabric-not-management")
    assert (head["host"], head["status"]) == ("spark-head", "PASS")
    assert head["message"].endswith("not compared: the management address spark-head is a name (not resolved here)")


def test_a_planned_result_without_a_plan_is_refused() -> None:
    bare = run(serving_profile, {"src": str(SPARK3), "hosts": []})
    result = run(boot_preflight, {"planned": bare, "facts": facts()})
    assert result["failed"] is True and "serving_profile result with a plan" in result["msg"]


def releases_kept(*summaries: dict[str, Any], promoted: str | None = None, previous: str | None = None) -> dict:
    return {**NO_RELEASES, "present": True, "releases": list(summaries), "promoted": promoted, "previous": previous}


def summary(
    ident: str,
    state: str,
    specs: dict[str, str],
    image_id: str = "sha256:aa",
    sha: str = "0" * 64,
    host_sha: str | None = None,
) -> dict:
    kept = {} if host_sha is None else {"host_sha256": host_sha}
    return {
        **kept,
        "id": ident,
        "state": state,
        "created": "2026-12-01T10:00:00Z",
        "by": "op",
        "profile_sha256": sha,
        "shape": "tp3-triangle",
        "image": "spark-ds41f:1030",
        "images": dict.fromkeys(HOSTVARS, image_id),
        "spec_sha256": specs,
    }


SPECS = {r["host"]: r["spec_sha256"] for r in PLANNED["plan"]["ranks"]}
OLD = "r20261130T100000Z-aaaaaaaaaaaa"
NOW = "r20261201T100000Z-" + PLANNED["profile_sha256"][:12]


def lines_of(result: dict[str, Any], check: str) -> list[str]:
    return [line for line in result["msg"] if f"  {check} " in line or line.startswith(f"{check}  ")]


def test_the_first_boot_records_the_first_release_promoted() -> None:
    result = run(boot_preflight, {"planned": PLANNED, "facts": facts(), "by": "op@ctl"})
    assert not result.get("failed"), result["msg"]
    assert result["release"]["decision"] == "first"
    record = result["release"]["record"]
    assert record["state"] == "promoted" and record["by"] == "op@ctl"
    assert record["profile"]["text"] == SPARK3.read_text()
    assert record["spec_sha256"] == SPECS and record["images"] == dict.fromkeys(HOSTVARS, "sha256:aa")
    assert [e["event"] for e in record["history"]] == ["booted", "promoted"]
    assert any("no release yet" in line for line in lines_of(result, "release"))


def test_another_profile_than_the_promoted_one_takes_boot_candidate() -> None:
    kept = releases_kept(summary(OLD, "promoted", dict.fromkeys(HOSTVARS, "old")), promoted=OLD)
    refused = run(boot_preflight, {"planned": PLANNED, "facts": facts(kept)})
    assert refused["failed"] is True
    assert any(f"the promoted release is {OLD}" in line and "boot_candidate" in line for line in refused["msg"])
    allowed = run(boot_preflight, {"planned": PLANNED, "facts": facts(kept), "candidate": True})
    assert not allowed.get("failed"), allowed["msg"]
    assert allowed["release"]["decision"] == "candidate" and allowed["release"]["record"]["state"] == "candidate"
    assert any("serves a CANDIDATE" in line for line in allowed["msg"])


def test_the_promoted_release_again_records_nothing() -> None:
    kept = releases_kept(summary(NOW, "promoted", SPECS, sha=PLANNED["profile_sha256"]), promoted=NOW)
    result = run(boot_preflight, {"planned": PLANNED, "facts": facts(kept)})
    assert not result.get("failed"), result["msg"]
    assert result["release"]["decision"] == "promoted" and result["release"]["record"] is None


def test_the_promoted_profile_rendered_anew_is_still_the_promoted_release() -> None:
    """A collection version that renders the same profile and shape differently (the API's --host, for one):
    the promoted release again, with a WARN and its new specs for the steady phase to record, not a FAIL."""
    old_specs = dict.fromkeys(HOSTVARS, "rendered-by-an-older-version")
    kept = releases_kept(summary(NOW, "promoted", old_specs, sha=PLANNED["profile_sha256"]), promoted=NOW)
    result = run(boot_preflight, {"planned": PLANNED, "facts": facts(kept)})
    assert not result.get("failed"), result["msg"]
    assert result["release"]["decision"] == "promoted" and result["release"]["respec"] == SPECS
    [line] = lines_of(result, "release")
    assert "WARN" in line and "now render differently" in line, line


def test_a_rollback_target_whose_image_is_gone_from_a_node_fails() -> None:
    kept = releases_kept(
        summary(OLD, "retired", dict.fromkeys(HOSTVARS, "old"), image_id="sha256:old"),
        summary(NOW, "promoted", SPECS, sha=PLANNED["profile_sha256"]),
        promoted=NOW,
        previous=OLD,
    )
    result = run(boot_preflight, {"planned": PLANNED, "facts": facts(kept)})
    assert result["failed"] is True
    gone = [line for line in result["msg"] if line.startswith("rollback-images  ")]
    assert len(gone) == 3 and f"images.yml -e dgxspark_release={OLD}" in gone[0]
    # with the old image on every node, it passes
    with_old = facts(kept)
    for node_facts_of in with_old.values():
        node_facts_of["docker"]["images"].append({"id": "sha256:old", "tags": []})
    assert not run(boot_preflight, {"planned": PLANNED, "facts": with_old}).get("failed")


def test_a_rollback_to_an_unknown_release_fails() -> None:
    result = run(boot_preflight, {"planned": PLANNED, "facts": facts(), "release": OLD})
    assert result["failed"] is True
    assert any(f"no release {OLD} on the head" in line for line in result["msg"])


def guard_settings() -> dict[str, Any]:
    role = pathlib.Path(__file__).resolve().parents[4] / "roles" / "memguard"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    return {name: copy.deepcopy(defaults[name]) for name in SETTINGS}


def test_the_memory_guards_difference_is_the_roles_own_and_no_key_is_made(tmp_path: pathlib.Path) -> None:
    """With the guard's role's settings given (the boot's preflight), each node's memory-guard difference is what
    the role's own difference entry point (memguard_plan, one host) finds on it; a node that matches has none and
    the role is then not entered; the peers' key is read, never made."""
    key_file = tmp_path / "memguard.key"
    guard = {"settings": guard_settings(), "key_file": str(key_file)}
    given = facts()
    result = run(boot_preflight, {"planned": PLANNED, "facts": given, "memguard": guard}, check_mode=True)
    assert not result.get("failed"), result.get("msg")
    for host in HOSTVARS:  # the GB10 facts hold no guard: every file would be written
        assert any(
            line.startswith("/etc/dgxspark-memguard/config.json:")
            for line in result["differences"][host]["memory guard"]
        )
    assert "memory guard" in result["to_converge"] and not key_file.exists()

    profile = PLANNED["profile"]
    for host in HOSTVARS:  # each node as the role would leave it
        one = run(
            memguard_plan,
            {
                "host_section": profile["host"],
                "container_name": profile["container"]["name"],
                "settings": guard["settings"],
                "key_file": guard["key_file"],
                "key_create": False,
                "node_facts": given[host],
            },
            task_vars={**TASK_VARS, "inventory_hostname": host},
        )
        assert one["difference"] == result["differences"][host]["memory guard"]
        expected = one["expected"]
        given[host] = {
            **given[host],
            "files": {"paths": {p: {"exists": True, "sha256": d} for p, d in expected["files"].items()}},
            "services": {
                "units": {u: {"active_state": "active", "unit_file_state": "enabled"} for u in expected["units"]}
            },
        }
    matched = run(boot_preflight, {"planned": PLANNED, "facts": given, "memguard": guard}, check_mode=True)
    assert all(d["memory guard"] == [] for d in matched["differences"].values()), matched["differences"]
    assert "memory guard" not in matched["to_converge"] and not key_file.exists()


HOST_SHA = _releases.host_sha256(PLANNED["profile"])


def test_the_first_release_records_the_hash_of_the_profiles_host_section() -> None:
    result = run(boot_preflight, {"planned": PLANNED, "facts": facts(), "by": "op@ctl"})
    assert result["release"]["record"]["host_sha256"] == HOST_SHA


def test_the_promoted_profile_booted_again_is_no_new_release_with_its_host_section_hashed() -> None:
    kept = releases_kept(
        summary(NOW, "promoted", SPECS, sha=PLANNED["profile_sha256"], host_sha=HOST_SHA), promoted=NOW
    )
    result = run(boot_preflight, {"planned": PLANNED, "facts": facts(kept)})
    assert not result.get("failed"), result["msg"]
    assert result["release"]["decision"] == "promoted" and result["release"]["record"] is None
    assert "host_changed" not in result["release"]


def test_a_change_of_the_host_section_alone_is_a_release() -> None:
    """The same ranks, spec for spec, with other guard floors: refused without boot_candidate, a candidate with it,
    recorded although no rank changes (host_changed)."""
    other = "f" * 64
    kept = releases_kept(summary(OLD, "promoted", SPECS, sha="1" * 64, host_sha=other), promoted=OLD)
    refused = run(boot_preflight, {"planned": PLANNED, "facts": facts(kept)})
    assert refused["failed"] is True and refused["release"]["decision"] is None
    failed = [f for f in refused["failures"] if f["check"] == "release"]
    assert len(failed) == 1 and "host section" in failed[0]["message"] and "boot_candidate" in failed[0]["message"]
    allowed = run(boot_preflight, {"planned": PLANNED, "facts": facts(kept), "candidate": True})
    assert not allowed.get("failed"), allowed["msg"]
    decision = allowed["release"]
    assert decision["decision"] == "candidate" and decision["host_changed"] is True
    assert decision["record"]["state"] == "candidate" and decision["record"]["host_sha256"] == HOST_SHA
    [line] = lines_of(allowed, "release")
    assert "CANDIDATE" in line and "another host section" in line, line


def test_a_host_only_candidate_booted_again_while_it_is_judged_is_not_recorded_twice() -> None:
    """The same host-only candidate booted twice: the second boot serves the candidate already recorded (no
    host_changed, so the steady phase records nothing); a retired one with that host section is no such candidate."""
    promoted = summary(OLD, "promoted", SPECS, sha="1" * 64, host_sha="f" * 64)
    judged = summary(NOW, "candidate", SPECS, sha=PLANNED["profile_sha256"], host_sha=HOST_SHA)
    again = run(
        boot_preflight,
        {"planned": PLANNED, "facts": facts(releases_kept(promoted, judged, promoted=OLD)), "candidate": True},
    )
    assert not again.get("failed"), again["msg"]
    assert again["release"]["decision"] == "candidate" and "host_changed" not in again["release"]
    [line] = lines_of(again, "release")
    assert f"the candidate {NOW} already recorded" in line, line
    retired = {**judged, "state": "retired"}
    anew = run(
        boot_preflight,
        {"planned": PLANNED, "facts": facts(releases_kept(promoted, retired, promoted=OLD)), "candidate": True},
    )
    assert anew["release"]["host_changed"] is True


def test_another_profile_file_with_the_same_host_section_and_ranks_is_the_promoted_release() -> None:
    kept = releases_kept(summary(OLD, "promoted", SPECS, sha="1" * 64, host_sha=HOST_SHA), promoted=OLD)
    result = run(boot_preflight, {"planned": PLANNED, "facts": facts(kept)})
    assert not result.get("failed"), result["msg"]
    assert result["release"]["decision"] == "promoted" and result["release"]["record"] is None


def test_a_release_kept_before_host_sections_were_hashed_judges_by_its_profile_file() -> None:
    """No host_sha256 in the kept release: the same file is the same release; another file with the same ranks may
    have another host section, so it is judged one (a candidate, or FAIL)."""
    same = releases_kept(summary(NOW, "promoted", SPECS, sha=PLANNED["profile_sha256"]), promoted=NOW)
    assert run(boot_preflight, {"planned": PLANNED, "facts": facts(same)})["release"]["decision"] == "promoted"
    other = releases_kept(summary(OLD, "promoted", SPECS, sha="1" * 64), promoted=OLD)
    result = run(boot_preflight, {"planned": PLANNED, "facts": facts(other)})
    assert result["failed"] is True and any("host section" in line for line in lines_of(result, "release"))
