# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""engram-nvme: with engram.placement disk (seed 002's TP8-1M), Engram reads from the node's local NVMe.

The nodes' facts are node_facts' own, gathered from the GB10 fixture tree (tests/unit/fixtures/node_facts/gb10:
its root on the NVMe SSD nvme0n1, an NFS mount of the head's models, tmpfs, Docker's overlay, a USB stick).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import CommandResult, Options, gather
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.engram_disk import (
    FAIL,
    PASS,
    SKIP,
    WARN,
    disk_paths,
    engram_storage,
    judge,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK8, edited
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import GB10
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__plan import cluster

SEED = "seed 002 sections 1 and 5.2 ('Engram-rijen op lokale NVMe')"


def node_facts(weights_path: str | None, paths: list[str]) -> dict[str, Any]:
    options = Options(
        sections=("disk",),
        proc_root=str(GB10 / "proc"),
        sys_root=str(GB10 / "sys"),
        weights_path=weights_path,
        disk_paths=tuple(paths),
    )
    return gather(options, lambda argv: CommandResult(1, "", "no tools here"))


def spark8(edits: dict[str, Any] | None = None, shape: str = "tp8-1m") -> tuple[dict[str, Any], dict[str, Any]]:
    profile = validate_profile(edited(json.loads(SPARK8.read_text()), edits or {}))
    return build_plan(profile, shape, cluster(8)), profile.data


def verdict(plan: dict[str, Any], profile: dict[str, Any], rank: int = 0) -> dict[str, str]:
    entry = plan["ranks"][rank]
    weights = profile["host"].get("weights_path")
    storage = engram_storage(
        profile["shapes"][plan["shape"]].get("engram", {}).get("placement"),
        entry["environment"],
        entry["docker_run_args"],
        profile["container"]["model_path"],
        weights,
    )
    node = node_facts(weights, plan["preflight"][entry["host"]]["disk_paths"])
    return judge(entry["host"], node, storage)


def test_seed002s_tp8_1m_reads_its_engram_rows_from_the_sparks_nvme() -> None:
    plan, profile = spark8()
    # the model's directory, bound from /models: node_facts is asked for it beside the weights path
    assert {h: p["disk_paths"] for h, p in plan["preflight"].items()} == {
        h: ["/models/DeepSeek-V4.1-Flash"] for h in plan["preflight"]
    }
    line = verdict(plan, profile)
    assert line == {
        "check": "engram-nvme",
        "host": "spark-head",
        "status": PASS,
        "message": "/models/DeepSeek-V4.1-Flash (the model's directory (container.model_path "
        "/models/DeepSeek-V4.1-Flash, bound by --volume=/models:/models:ro): the Engram-on-disk patch reads the rows "
        "from the checkpoint's Engram shards) is on ext4 /dev/nvme0n1p2, mounted on / (device nvme0n1p2): local "
        f"NVMe nvme0n1 (NVMe SSD 4TB (illustrative model name), NVMe over pcie), as {SEED} wants",
    }


def test_tp8_300k_keeps_engram_in_memory() -> None:
    plan, profile = spark8(shape="tp8-300k")
    assert {h: p["disk_paths"] for h, p in plan["preflight"].items()} == {h: [] for h in plan["preflight"]}
    line = verdict(plan, profile, rank=3)
    assert line["status"] == SKIP
    assert line["message"] == "engram.placement is host-memory: the Engram tables are not read from disk"


def nfs_workers() -> dict[str, Any]:
    # tonyd2wild's TP4 recipe (docs/RECIPE.md): the head exports its models over NFS and the workers mount them
    args = json.loads(SPARK8.read_text())["container"]["docker_run_args"]
    return {
        "host/weights_path": "/mnt/head-models",
        "container/docker_run_args": [*args[:-1], "--volume=/mnt/head-models:/models:ro"],
    }


def test_weights_on_nfs_fail_naming_the_seed() -> None:
    plan, profile = spark8(nfs_workers())
    assert plan["preflight"]["spark-w1"]["disk_paths"] == ["/mnt/head-models/DeepSeek-V4.1-Flash"]
    line = verdict(plan, profile, rank=1)
    assert line["status"] == FAIL
    assert line["message"] == (
        "/mnt/head-models/DeepSeek-V4.1-Flash (the model's directory (container.model_path "
        "/models/DeepSeek-V4.1-Flash, bound by --volume=/mnt/head-models:/models:ro): the Engram-on-disk patch reads "
        "the rows from the checkpoint's Engram shards) is on nfs 192.168.100.10:/models, mounted on /mnt/head-models: "
        "a network file system, so every Engram row a forward pass reads is a round trip to another machine; "
        f"{SEED}; put the weights (or a copy of the Engram rows, DSV41_ENGRAM_DIR bound from the node) on the node's "
        "own NVMe SSD, or run the shape with engram.placement host-memory"
    )


@pytest.mark.parametrize(
    "source,status,words",
    [
        # a local copy of the rows, as tonyd2wild's README binds it: on the NVMe root
        ("/srv/engram-local", PASS, "local NVMe nvme0n1"),
        ("/run/engram-rows", FAIL, "is on tmpfs tmpfs, mounted on /run/engram-rows: memory, the unified memory"),
        ("/media/usb stick/engram", FAIL, "sda (USB Flash Disk (illustrative model name), rotational, removable) "),
    ],
)
def test_a_dedicated_engram_directory_is_followed_through_its_bind(source: str, status: str, words: str) -> None:
    args = json.loads(SPARK8.read_text())["container"]["docker_run_args"]
    edits: dict[str, Any] = {
        "shapes/tp8-1m/environment/DSV41_ENGRAM_DIR": "/engram-local",
        "container/docker_run_args": [*args, f"--volume={source}:/engram-local:ro"],
        "host/engram_path": source,  # a path a rank may have bound (the bind allow-list)
    }
    if source.startswith("/run/"):
        edits["waivers"] = {"host-mounts": "a test of the preflight's verdict on rows in tmpfs"}
    plan, profile = spark8(edits)
    assert plan["preflight"]["spark-w7"]["disk_paths"] == [source]
    line = verdict(plan, profile, rank=7)
    assert line["status"] == status, line["message"]
    assert line["message"].startswith(f"{source} (DSV41_ENGRAM_DIR=/engram-local, bound by --volume={source}:/engram")
    assert words in line["message"]


def test_an_engram_directory_in_the_image_cannot_be_checked() -> None:
    storage = engram_storage("disk", {"DSV41_ENGRAM_DIR": "/engram"}, ["--volume=/models:/models:ro"], None, "/models")
    assert storage == {
        "placement": "disk",
        "path": None,
        "source": "DSV41_ENGRAM_DIR=/engram is not under any bind mount of the rank's docker_run_args, so where it is "
        "on the node cannot be told",
    }
    assert judge("spark-w1", {}, storage)["status"] == WARN
    assert disk_paths(storage, "/models") == []


def test_without_a_bind_the_weights_path_is_where_engram_reads() -> None:
    storage = engram_storage("disk", {}, [], "deepseek-ai/DeepSeek-V4.1-Flash-1017", "/models")
    assert (storage["path"], storage["source"]) == (
        "/models",
        "host.weights_path: the Engram rows are read from the weights",
    )
    assert disk_paths(storage, "/models/") == []  # the weights path is always gathered
    line = judge("spark-w1", node_facts("/models", []), storage)
    assert line["status"] == PASS


@pytest.mark.parametrize(
    "mount,status,words",
    [
        ({"kind": "overlay", "fstype": "overlay", "via": "overlay layer /l on tmpfs tmpfs (/l)"}, FAIL, "an overlay"),
        ({"kind": "unknown", "fstype": "zfs", "source": "rpool/models"}, WARN, "could not tell the block device"),
        ({"error": "the mount table (mountinfo) could not be read"}, WARN, "could not tell where"),
        (
            {"kind": "block", "disks": [{"name": "nvme2n1", "nvme": True, "transport": "tcp"}]},
            FAIL,
            "nvme2n1 (NVMe over tcp) is another machine's disk (NVMe over Fabrics), not a local one",
        ),
    ],
)
def test_what_the_mount_is_decides(mount: dict[str, Any], status: str, words: str) -> None:
    storage = {"placement": "disk", "path": "/models", "source": "host.weights_path"}
    line = judge("spark-w2", {"disk": {"mounts": {"/models": mount}}}, storage)
    assert line["status"] == status and words in line["message"], line["message"]
    if status == FAIL:
        assert SEED in line["message"]


def test_facts_without_the_mount_warn() -> None:
    storage = {"placement": "disk", "path": "/models", "source": "host.weights_path"}
    line = judge("spark-w2", {"disk": {"path": "/models"}}, storage)
    assert line["status"] == WARN and "node_facts gathered no mount for it" in line["message"]
