# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight's weights-identity check: the nodes' manifests compared file by file."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.weights import identity

# Seed 002's eight nodes, named as inventories/spark8 names them (rank order, head first).
HOSTS = ["spark-head", *(f"spark-w{i}" for i in range(1, 8))]
PATH = "/models"
# DeepSeek-V4.1-Flash's checkpoint as the recipes seed 002 adapts describe it: 48 shards (the TP8 port checks
# for model-00048-of-00048.safetensors) making a 510 GB checkpoint (tonyd2wild's docs/RECIPE.md), plus its
# config and index. Sizes and hashes are stand-ins with that count and total.
SHARD_BYTES = 510 * 10**9 // 48
SHARDS = [f"DeepSeek-V4.1-Flash/model-{i:05d}-of-00048.safetensors" for i in range(1, 49)]
CONFIG = "DeepSeek-V4.1-Flash/config.json"
INDEX = "DeepSeek-V4.1-Flash/model.safetensors.index.json"
TOO_MANY = "more than 10000 files under /: not a model directory? Nothing was hashed"


def digest(name: str, variant: str = "") -> str:
    return hashlib.sha256(f"{name} {variant}".encode()).hexdigest()


def manifest(hashed: bool = True) -> dict[str, Any]:
    files = {CONFIG: {"size": 1843, "sha256": digest(CONFIG)}, INDEX: {"size": 9_912_338, "sha256": digest(INDEX)}}
    files.update({name: {"size": SHARD_BYTES, "sha256": digest(name) if hashed else None} for name in SHARDS})
    return {
        "path": PATH,
        "exists": True,
        "error": None,
        "files": files,
        "file_count": len(files),
        "total_bytes": sum(f["size"] for f in files.values()),
    }


def cluster(**edits: Any) -> dict[str, Any]:
    """Every node with the same weights, then ``edits``: host to a function that changes its manifest."""
    facts = {host: {"memory": {}, "weights": manifest()} for host in HOSTS}
    for host, edit in edits.items():
        edit(facts[host]["weights"])
    return facts


def status(verdicts: dict[str, tuple[str, str]]) -> dict[str, str]:
    return {host: verdict[0] for host, verdict in verdicts.items()}


def test_the_same_weights_on_eight_nodes_pass_with_the_file_count_and_size() -> None:
    verdicts = identity(cluster(), HOSTS, PATH)
    assert set(status(verdicts).values()) == {"PASS"}
    assert verdicts["spark-w3"] == (
        "PASS",
        "50 files, 475.0 GiB, the same as on the other 7 node(s); every one compared by SHA-256",
    )


def drop(name: str) -> Any:
    return lambda weights: weights["files"].pop(name)


def resize(name: str, size: int) -> Any:
    return lambda weights: weights["files"][name].update(size=size)


def rehash(name: str) -> Any:
    return lambda weights: weights["files"][name].update(sha256=digest(name, "other"))


def add(name: str) -> Any:
    return lambda weights: weights["files"].update({name: {"size": 5, "sha256": digest(name)}})


@pytest.mark.parametrize(
    "edits,failed",
    [
        pytest.param(
            {"spark-w5": drop(SHARDS[47])},
            {
                "spark-w5": f"{PATH}: 1 file(s) differ from the other nodes: {SHARDS[47]}: missing (on spark-head "
                "and 6 others); copy the weights again from a node that matches (such as spark-head) with "
                "playbooks/weights.yml (-e weights_source=HOST), then run the "
                "preflight again"
            },
            id="a shard missing",
        ),
        pytest.param(
            {"spark-w2": resize(SHARDS[11], 4_294_967_296)},
            {
                "spark-w2": f"{SHARDS[11]}: size 4,294,967,296 bytes, expected 10,625,000,000 bytes (as on spark-head "
                "and 6 others)"
            },
            id="a shard copied halfway",
        ),
        pytest.param(
            {"spark-w7": rehash(CONFIG)},
            {
                "spark-w7": f"{CONFIG}: sha256 {digest(CONFIG, 'other')[:16]}..., expected {digest(CONFIG)[:16]}... "
                "(as on spark-head and 6 others)"
            },
            id="another revision's config",
        ),
        pytest.param(
            {"spark-w1": add("DeepSeek-V4.1-Flash/model-00049-of-00048.safetensors")},
            {"spark-w1": "model-00049-of-00048.safetensors: present here, not on spark-head and 6 others"},
            id="a file the others lack",
        ),
        pytest.param(
            {"spark-head": drop(INDEX)},
            {"spark-head": f"{INDEX}: missing (on spark-w1 and 6 others)"},
            id="the head is the odd one",
        ),
    ],
)
def test_a_node_that_differs_fails_naming_the_file_and_what_differs(
    edits: dict[str, Any], failed: dict[str, str]
) -> None:
    verdicts = identity(cluster(**edits), HOSTS, PATH)
    assert {h for h, s in status(verdicts).items() if s == "FAIL"} == set(failed)
    for host, fragment in failed.items():
        assert fragment in verdicts[host][1], verdicts[host][1]


def test_many_differences_are_counted_past_the_first_six() -> None:
    def half_copied(weights: dict[str, Any]) -> None:
        for name in SHARDS[24:]:
            del weights["files"][name]

    message = identity(cluster(**{"spark-w4": half_copied}), HOSTS, PATH)["spark-w4"][1]
    assert message.startswith(f"{PATH}: 24 file(s) differ from the other nodes: {SHARDS[24]}: missing")
    assert "; and 18 more; copy the weights again" in message


def test_a_tie_goes_to_the_head() -> None:
    verdicts = identity(cluster(**{"spark-w1": rehash(CONFIG)}), HOSTS[:2], PATH)
    assert status(verdicts) == {"spark-head": "PASS", "spark-w1": "FAIL"}


def test_files_not_hashed_yet_are_compared_by_size_and_said_so() -> None:
    facts = cluster()
    facts["spark-w6"]["weights"] = manifest(hashed=False)
    verdicts = identity(facts, HOSTS, PATH)
    assert verdicts["spark-w6"] == (
        "PASS",
        "50 files, 475.0 GiB, the same as on the other 7 node(s); 2 compared by SHA-256, 48 by size only (not hashed "
        "yet on this node or the others: a later preflight goes on hashing, or run node_facts with a larger "
        "weights_hash_seconds)",
    )
    assert verdicts["spark-head"][1].endswith("every one compared by SHA-256")  # 6 others hashed them too
    facts["spark-w6"]["weights"]["files"][SHARDS[0]]["size"] += 1  # a size still tells a bad copy
    assert identity(facts, HOSTS, PATH)["spark-w6"][0] == "FAIL"


@pytest.mark.parametrize(
    "node,verdict",
    [
        (None, ("SKIP", "no node facts: nothing to compare")),
        ({"memory": {}}, ("SKIP", "no manifest gathered (node_facts sections: [weights], with weights_path)")),
        (
            {"weights": {"path": PATH, "exists": False}},
            ("SKIP", "no manifest: /models does not exist on this node (the weights check fails it)"),
        ),
        (
            {"weights": {**manifest(), "error": TOO_MANY}},
            ("WARN", f"no manifest to compare: {TOO_MANY}"),
        ),
    ],
    ids=["no facts", "not gathered", "path missing", "not a model directory"],
)
def test_a_node_without_a_manifest_is_skipped_and_the_others_compared(node: Any, verdict: tuple[str, str]) -> None:
    facts = cluster()
    facts["spark-w3"] = copy.deepcopy(node)
    verdicts = identity(facts, HOSTS, PATH)
    assert verdicts["spark-w3"] == verdict
    assert verdicts["spark-w4"][1].startswith("50 files, 475.0 GiB, the same as on the other 6 node(s)")


def test_nothing_to_compare() -> None:
    assert set(identity(cluster(), HOSTS, None).values()) == {("SKIP", "the profile names no host.weights_path")}
    alone = {host: {"memory": {}} for host in HOSTS}
    alone["spark-head"]["weights"] = manifest()
    assert identity(alone, HOSTS, PATH)["spark-head"] == (
        "SKIP",
        "the only node with a manifest: nothing to compare it with",
    )
