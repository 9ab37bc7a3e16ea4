# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The weights sync's plan (issue 30): from every node's manifest and free space, what goes where before anything
moves."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.filter.weights import FilterModule
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.weights.sync_plan import name_problem, plan

# Seed 000's three nodes as inventories/spark3 names them, head first, with their fabric and management addresses.
HOSTS = ["spark-head", "spark-w1", "spark-w2"]
FABRIC = {h: {"fabric": {"address": f"10.99.4.{i + 1}"}} for i, h in enumerate(HOSTS)}
MANAGEMENT = {h: f"192.168.1.{i + 10}" for i, h in enumerate(HOSTS)}
PATH = "/models"
TIB = 1024**4
MODEL = "DeepSeek-V4.1-Flash"
# DeepSeek-V4.1-Flash's checkpoint as the preflight's tests take it (test__weights_identity.py): 48 shards making
# 510 GB, plus its config, index and tokenizer; and many small files beside (a few hundred: per-layer calibration
# tables, as some quantised checkpoints ship). Sizes and hashes are stand-ins.
SHARD_BYTES = 510 * 10**9 // 48
SHARDS = [f"{MODEL}/model-{i:05d}-of-00048.safetensors" for i in range(1, 49)]
SMALL = [f"{MODEL}/calibration/layer-{i:03d}.json" for i in range(300)]


def digest(name: str, variant: str = "") -> str:
    return hashlib.sha256(f"{name} {variant}".encode()).hexdigest()


def files() -> dict[str, dict[str, Any]]:
    found = {
        f"{MODEL}/config.json": {"size": 1843, "sha256": digest("config")},
        f"{MODEL}/model.safetensors.index.json": {"size": 9_912_338, "sha256": digest("index")},
        f"{MODEL}/tokenizer.json": {"size": 7_847_602, "sha256": digest("tokenizer")},
    }
    found.update({name: {"size": 4096 + i, "sha256": digest(name)} for i, name in enumerate(SMALL)})
    found.update({name: {"size": SHARD_BYTES, "sha256": digest(name)} for name in SHARDS})
    return found


def node(free: int = 2 * TIB) -> dict[str, Any]:
    listing = files()
    return {
        "weights": {
            "path": PATH,
            "root": PATH,
            "exists": True,
            "error": None,
            "files": listing,
            "file_count": len(listing),
            "total_bytes": sum(f["size"] for f in listing.values()),
        },
        "disk": {"path": PATH, "exists": True, "available_bytes": free, "free_bytes": free, "read_only": False},
    }


def cluster() -> dict[str, Any]:
    return {host: node() for host in HOSTS}


def sync(facts: dict[str, Any], **options: Any) -> dict[str, Any]:
    options.setdefault("fabric", FABRIC)
    options.setdefault("management", MANAGEMENT)
    return plan(facts, HOSTS, "spark-head", PATH, **options)


def target(result: dict[str, Any], host: str) -> dict[str, Any]:
    return next(t for t in result["targets"] if t["host"] == host)


def sent(result: dict[str, Any], host: str) -> dict[str, str]:
    return {item["name"]: item["reason"] for item in target(result, host)["send"]}


def test_a_matching_cluster_moves_nothing() -> None:
    result = sync(cluster())
    assert result["refusal"] == ""
    assert (result["moving"], result["matching"]) == ([], ["spark-w1", "spark-w2"])
    assert (result["bytes"], result["files"]) == (0, 0)
    assert result["summary"] == "/models: every node (2) matches spark-head: nothing moves"
    assert result["source"]["files"] == 351
    assert result["lines"][1] == "spark-w1 (10.99.4.2, fabric): matches spark-head (351 files), nothing to send"


def test_a_missing_a_truncated_and_a_differing_shard_are_sent_and_nothing_else() -> None:
    facts = cluster()
    held = facts["spark-w1"]["weights"]["files"]
    for name in SHARDS[45:]:
        del held[name]  # three shards missing
    held[SHARDS[0]]["size"] = SHARD_BYTES // 3  # a copy cut short
    held[SHARDS[1]]["sha256"] = digest(SHARDS[1], "corrupt")  # same size, another hash
    held[SMALL[7]]["size"] += 1  # one small file longer than the source's
    result = sync(facts)
    assert result["refusal"] == ""
    assert sent(result, "spark-w1") == {
        SHARDS[45]: "missing",
        SHARDS[46]: "missing",
        SHARDS[47]: "missing",
        SHARDS[0]: "truncated",
        SHARDS[1]: "sha256",
        SMALL[7]: "size",
    }
    w1 = target(result, "spark-w1")
    assert w1["bytes"] == 5 * SHARD_BYTES + 4096 + 7
    assert w1["by_reason"] == {"missing": 3, "truncated": 1, "size": 1, "sha256": 1}
    assert w1["fits"] is True
    assert (result["moving"], result["matching"]) == (["spark-w1"], ["spark-w2"])
    assert (result["bytes"], result["files"]) == (w1["bytes"], 6)
    truncated = next(i for i in w1["send"] if i["reason"] == "truncated")
    assert truncated["detail"] == f"{SHARD_BYTES // 3:,} of {SHARD_BYTES:,} bytes"
    assert result["summary"] == (
        "/models: 1 of 2 node(s) differ from spark-head (spark-w1): sends 6 file(s), 49.5 GiB in all"
    )
    line = next(line for line in result["lines"] if line.startswith("spark-w1 ("))
    assert line.startswith("spark-w1 (10.99.4.2, fabric): gets 6 of 351 files, 49.5 GiB (3 missing, 1 truncated, ")
    assert "and 0 more" not in line


def test_a_node_without_the_weights_path_gets_everything() -> None:
    facts = cluster()
    facts["spark-w2"]["weights"] = {"path": PATH, "exists": False, "error": None, "files": {}}
    facts["spark-w2"]["disk"].update(exists=False, checked_path="/")
    result = sync(facts)
    assert result["refusal"] == ""
    w2 = target(result, "spark-w2")
    assert len(w2["send"]) == 351 and set(sent(result, "spark-w2").values()) == {"missing"}
    assert w2["bytes"] == result["source"]["bytes"]
    assert "and 345 more" in next(line for line in result["lines"] if line.startswith("spark-w2 ("))


def test_a_full_disk_is_refused_before_anything_moves_naming_node_needed_and_free() -> None:
    facts = cluster()
    del facts["spark-w2"]["weights"]["files"][SHARDS[3]]
    del facts["spark-w2"]["weights"]["files"][SHARDS[4]]
    facts["spark-w2"]["disk"]["available_bytes"] = 5 * 1024**3
    result = sync(facts)
    assert result["refusal"] == (
        "weights.yml: nothing was moved: spark-w2: not enough free space under /models: needs 19.8 GiB "
        f"({2 * SHARD_BYTES:,} bytes, and 1.0 GiB kept free), has 5.0 GiB ({5 * 1024**3:,} bytes) free"
    )
    assert target(result, "spark-w2")["fits"] is False
    assert result["summary"] == "refused (1 problem(s)): nothing moves"
    # the lines still say what would have moved
    assert any(line.startswith("spark-w2 (10.99.4.3, fabric): gets 2 of 351 files") for line in result["lines"])


def test_the_reserve_counts_and_can_be_set() -> None:
    facts = cluster()
    del facts["spark-w1"]["weights"]["files"][SHARDS[0]]
    facts["spark-w1"]["disk"]["available_bytes"] = SHARD_BYTES + 1024
    assert "not enough free space" in sync(facts)["refusal"]
    assert sync(facts, reserve_bytes=0)["refusal"] == ""


@pytest.mark.parametrize(
    "disk,why",
    [
        (None, "spark-w1: its free space is unknown (node_facts sections: [disk], with weights_path)"),
        ({"path": PATH, "available_bytes": TIB, "read_only": True, "checked_path": PATH}, "read-only filesystem"),
    ],
)
def test_unknown_or_read_only_space_is_refused_where_something_would_move(disk: Any, why: str) -> None:
    facts = cluster()
    del facts["spark-w1"]["weights"]["files"][SHARDS[0]]
    facts["spark-w1"]["disk"] = disk
    assert why in sync(facts)["refusal"]
    facts["spark-w1"]["weights"]["files"][SHARDS[0]] = files()[SHARDS[0]]
    assert sync(facts)["refusal"] == ""  # nothing to send: its space does not matter


def test_extra_files_are_listed_and_kept_unless_delete() -> None:
    facts = cluster()
    extras = {f"{MODEL}/model-00049-of-00048.safetensors": SHARD_BYTES, "old-model/config.json": 1200}
    for name, size in extras.items():
        facts["spark-w2"]["weights"]["files"][name] = {"size": size, "sha256": digest(name)}
    kept = sync(facts)
    w2 = target(kept, "spark-w2")
    assert (w2["extra"], w2["delete"], w2["moves"]) == (sorted(extras), [], False)
    assert kept["moving"] == [] and kept["summary"].endswith("nothing moves")
    assert (
        "spark-w2: 2 file(s) not on spark-head, kept: only -e weights_delete=true deletes them: "
        f"{MODEL}/model-00049-of-00048.safetensors, old-model/config.json"
    ) in kept["lines"]
    deleting = sync(facts, delete=True)
    w2 = target(deleting, "spark-w2")
    assert (w2["delete"], w2["moves"], w2["send"]) == (sorted(extras), True, [])
    assert deleting["moving"] == ["spark-w2"]
    assert deleting["summary"].endswith("sends 0 file(s), 0 B in all, deletes 2 file(s)")
    assert any("deleted (weights_delete)" in line for line in deleting["lines"])
    assert deleting["delete"] is True and kept["delete"] is False


@pytest.mark.parametrize(
    "name,problem",
    [
        ("../etc/shadow", "'..' leads outside the weights path"),
        (f"{MODEL}/../../root/.ssh/authorized_keys", "'..' leads outside"),
        ("/etc/passwd", "an absolute path"),
        (f"{MODEL}//config.json", "an empty or '.' component"),
        (f"./{MODEL}/config.json", "an empty or '.' component"),
        (f"{MODEL}/a\nb", "a control character"),
        ("..\\evil", "a backslash"),
        ("", "an empty name"),
    ],
)
def test_a_name_outside_the_weights_path_is_refused(name: str, problem: str) -> None:
    assert problem in name_problem(name)
    on_source = cluster()
    on_source["spark-head"]["weights"]["files"][name] = {"size": 10, "sha256": digest(name)}
    result = sync(on_source)
    assert result["refusal"].startswith("weights.yml: nothing was moved: the source spark-head: a name outside /models")
    assert problem in result["refusal"] and result["targets"] == []
    on_target = cluster()  # a name a delete would reach
    on_target["spark-w1"]["weights"]["files"][name] = {"size": 10, "sha256": digest(name)}
    result = sync(on_target, delete=True)
    assert result["refusal"].startswith("weights.yml: nothing was moved: spark-w1: a name outside /models")


def test_plain_names_are_accepted() -> None:
    assert name_problem(f"{MODEL}/model-00001-of-00048.safetensors") == ""
    assert name_problem("model..v2.safetensors") == ""


@pytest.mark.parametrize(
    "weights,why",
    [
        (None, "no manifest gathered"),
        ({"path": PATH, "exists": False, "files": {}}, "/models does not exist"),
        ({"path": PATH, "exists": True, "error": None, "files": {}}, "/models holds no files"),
        ({"path": PATH, "exists": True, "error": "more than 10000 files under /models: ..."}, "cannot be used: more"),
        ({"path": "/srv/other", "exists": True, "files": {"a": {"size": 1}}}, "the manifest is of /srv/other"),
    ],
)
def test_a_source_without_the_weights_is_refused(weights: Any, why: str) -> None:
    facts = cluster()
    facts["spark-head"]["weights"] = weights
    result = sync(facts)
    assert result["refusal"].startswith("weights.yml: nothing was moved: the source spark-head has no weights to send")
    assert why in result["refusal"]


def test_a_named_source_sends_to_the_head_too() -> None:
    facts = cluster()
    del facts["spark-head"]["weights"]["files"][SHARDS[9]]
    result = sync(facts, source="spark-w2")
    assert result["source"]["host"] == "spark-w2"
    assert sent(result, "spark-head") == {SHARDS[9]: "missing"}
    assert [t["host"] for t in result["targets"]] == ["spark-head", "spark-w1"]


def test_an_unknown_source_is_refused() -> None:
    result = sync(cluster(), source="spark-w9")
    assert result["refusal"] == (
        "weights.yml: nothing was moved: the source spark-w9 is not one of the cluster's nodes "
        "(spark-head, spark-w1, spark-w2)"
    )


def test_a_target_whose_manifest_cannot_be_used_is_refused() -> None:
    facts = cluster()
    facts["spark-w1"]["weights"] = {"path": PATH, "exists": True, "error": "cannot list /models: Permission denied"}
    del facts["spark-w2"]
    refusal = sync(facts)["refusal"]
    assert "spark-w1: cannot tell which files it lacks: its manifest cannot be used: cannot list /models" in refusal
    assert "spark-w2: cannot tell which files it lacks: its facts were not read" in refusal


def test_no_weights_path_is_refused() -> None:
    assert "names no host.weights_path" in plan(cluster(), HOSTS, "spark-head", None)["refusal"]
    assert "is not absolute" in plan(cluster(), HOSTS, "spark-head", "models")["refusal"]


def test_the_fabric_address_where_the_plan_has_one_else_management() -> None:
    facts = cluster()
    del facts["spark-w1"]["weights"]["files"][SHARDS[0]]
    no_fabric = {h: s for h, s in FABRIC.items() if h != "spark-w1"}
    result = sync(facts, fabric=no_fabric)
    assert (result["source"]["address"], result["source"]["network"]) == ("10.99.4.1", "fabric")
    assert (target(result, "spark-w1")["address"], target(result, "spark-w1")["network"]) == (
        "192.168.1.11",
        "management",
    )
    assert (target(result, "spark-w2")["address"], target(result, "spark-w2")["network"]) == ("10.99.4.3", "fabric")
    # each pair's source address is on the pair's network
    assert (target(result, "spark-w1")["source_address"], target(result, "spark-w2")["source_address"]) == (
        "192.168.1.10",
        "10.99.4.1",
    )
    managed = sync(facts, network="management")
    assert {t["network"] for t in managed["targets"]} == {"management"}
    assert managed["source"]["address"] == "192.168.1.10"
    # a source without a fabric address: both ends over the management network
    no_source = sync(facts, fabric={h: s for h, s in FABRIC.items() if h != "spark-head"})
    assert {t["network"] for t in no_source["targets"]} == {"management"}
    # no management address: the inventory name, as Ansible would reach it
    assert target(sync(facts, fabric={}, management={}), "spark-w1")["address"] == "spark-w1"
    assert "network must be one of" in sync(facts, network="infiniband")["refusal"]


def test_unhashed_files_of_the_same_size_are_compared_by_size_and_said_so() -> None:
    facts = cluster()
    for name in SHARDS[40:]:
        facts["spark-head"]["weights"]["files"][name]["sha256"] = None
    facts["spark-w1"]["weights"]["files"][SHARDS[47]]["size"] -= 1
    result = sync(facts)
    assert sent(result, "spark-w1") == {SHARDS[47]: "truncated"}
    assert len(target(result, "spark-w1")["unverified"]) == 7
    assert len(target(result, "spark-w2")["unverified"]) == 8
    assert result["warnings"] == [
        "the source spark-head has not hashed 8 of its 351 files yet: files of the same size there and on a target are "
        "compared by size alone (a larger weights_hash_seconds hashes them)"
    ]
    assert (
        "spark-w2: 8 file(s) of the same size compared by size alone (not hashed on one side yet), not sent"
        in (result["lines"])
    )


def test_a_file_where_the_source_has_a_directory_is_refused() -> None:
    facts = cluster()
    facts["spark-w1"]["weights"]["files"][f"{MODEL}/calibration"] = {"size": 10, "sha256": digest("x")}
    refusal = sync(facts, delete=True)["refusal"]
    assert f"spark-w1: {MODEL}/calibration: a directory on the source, a file here" in refusal
    facts = cluster()
    facts["spark-w1"]["weights"]["files"][f"{MODEL}/config.json/stale"] = {"size": 10, "sha256": digest("x")}
    assert f"{MODEL}/config.json: a file on the source, a directory here" in sync(facts)["refusal"]


def test_the_plan_is_idempotent_once_the_sends_arrived() -> None:
    facts = cluster()
    del facts["spark-w1"]["weights"]["files"][SHARDS[2]]
    first = sync(facts)
    assert first["moving"] == ["spark-w1"]
    arrived = copy.deepcopy(facts)
    for item in target(first, "spark-w1")["send"]:
        arrived["spark-w1"]["weights"]["files"][item["name"]] = dict(
            facts["spark-head"]["weights"]["files"][item["name"]]
        )
    again = sync(arrived)
    assert (again["moving"], again["bytes"], again["refusal"]) == ([], 0, "")


def test_the_filter_takes_the_playbooks_arguments() -> None:
    weights_sync_plan = FilterModule().filters()["weights_sync_plan"]
    facts = cluster()
    del facts["spark-w2"]["weights"]["files"][SHARDS[5]]
    result = weights_sync_plan(facts, HOSTS, "spark-head", PATH, "", FABRIC, MANAGEMENT, "false", "fabric", "0")
    assert result["moving"] == ["spark-w2"] and result["delete"] is False and result["reserve_bytes"] == 0
    assert weights_sync_plan(facts, HOSTS, "spark-head", PATH, delete="yes")["delete"] is True


def test_the_model_cache_view_names_dir_size_match_and_free_space() -> None:
    facts = cluster()
    del facts["spark-w1"]["weights"]["files"][SHARDS[0]]
    facts["spark-w1"]["weights"]["file_count"] -= 1
    facts["spark-w1"]["weights"]["total_bytes"] -= SHARD_BYTES
    facts["spark-w2"]["weights"]["files"]["notes.txt"] = {"size": 5, "sha256": digest("notes")}
    facts["spark-w2"]["disk"]["available_bytes"] = 3 * TIB
    view = sync(facts)["report"]
    assert len(view) == 3
    head, w1, w2 = view
    assert head == "spark-head: /models, 351 files, 475.0 GiB; the source; 2048.0 GiB free", head
    assert "spark-w1: /models, 350 files" in w1 and "DIFFERS from spark-head: 1 file(s), " in w1 and "1 missing" in w1
    assert "matches spark-head (SHA-256); 1 file(s) not on spark-head; 3072.0 GiB free" in w2, w2


def test_the_model_cache_view_says_where_hashes_are_missing_and_space_unknown() -> None:
    facts = cluster()
    facts["spark-w1"]["weights"]["files"][SHARDS[1]]["sha256"] = None
    facts["spark-w1"]["weights"]["not_hashed"] = 1
    del facts["spark-w2"]["disk"]
    view = sync(facts)["report"]
    assert "(1 not hashed yet); matches spark-head by size (1 file(s) not hashed on one side yet)" in view[1], view
    assert "its free space is unknown" in view[2], view
