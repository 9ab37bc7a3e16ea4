# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engram on disk reads from the node's local NVMe: the preflight's ``engram-nvme`` check.

Seed 002 runs TP8-1M with "de Engram-tabellen ... via de Engram-on-disk-patch op lokale NVMe" (section 1) and
``DSV41_ENGRAM_DISK 1``, "Engram-rijen op lokale NVMe" (section 5.2). The patch reads the rows of the two
Engram tables during every forward pass instead of holding them in memory; from a network file system each
read is a round trip, from tmpfs they sit in the unified memory the patch exists to spare, and a slower disk
slows every step. So on every rank's node, the directory Engram reads must be on an NVMe SSD of that node.

Which directory: the seeds name none of their own, and the profile has no field for it. The Engram-on-disk
patch reads the rows from the checkpoint's Engram shards (tonyd2wild/DeepSeek-V4.1-Flash-vLLM-DGX-Spark,
docs/RECIPE.md: "rows are read on demand from shards 47/48 with preadv"), so it is the model's directory: the
container's ``model_path`` mapped through the rank's bind mounts to the node, else ``host.weights_path``. A rank
whose environment sets ``DSV41_ENGRAM_DIR`` (a local copy of the rows, as the same project's README does:
``-v "$ENGRAM_DIR:/engram-local:ro" -e DSV41_ENGRAM_DIR=/engram-local``) reads there instead, mapped the same
way. The plan names the path per host (``disk_paths``) so node_facts reports its mount (``disk.mounts``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.docker_args import host_path

CHECK = "engram-nvme"
ENGRAM_DIR_ENV = "DSV41_ENGRAM_DIR"
SEED = "seed 002 sections 1 and 5.2 ('Engram-rijen op lokale NVMe')"
PASS, FAIL, WARN, SKIP = "PASS", "FAIL", "WARN", "SKIP"
LOCAL_TRANSPORTS = ("pcie",)
FIX = (
    "put the weights (or a copy of the Engram rows, DSV41_ENGRAM_DIR bound from the node) on the node's own NVMe "
    "SSD, or run the shape with engram.placement host-memory"
)


def engram_storage(
    placement: str | None,
    environment: Mapping[str, str],
    docker_run_args: Sequence[str],
    model_path: str | None,
    weights_path: str | None,
) -> dict[str, Any]:
    """Where a rank's Engram tables are read from on its node: ``placement``, ``path`` (the node's path, None when
    it cannot be told or the tables are not on disk) and ``source`` (how the path was found, or why not)."""
    found: dict[str, Any] = {"placement": placement, "path": None, "source": ""}
    if placement != "disk":
        return found
    directory = environment.get(ENGRAM_DIR_ENV)
    if directory:
        mapped = host_path(docker_run_args, directory)
        if mapped is None:
            found["source"] = (
                f"{ENGRAM_DIR_ENV}={directory} is not under any bind mount of the rank's docker_run_args, so where it "
                "is on the node cannot be told"
            )
        else:
            found.update(path=mapped[0], source=f"{ENGRAM_DIR_ENV}={directory}, bound by {mapped[1]}")
        return found
    mapped = host_path(docker_run_args, model_path) if model_path else None
    if mapped is not None:
        found.update(
            path=mapped[0],
            source=f"the model's directory (container.model_path {model_path}, bound by {mapped[1]}): the "
            "Engram-on-disk patch reads the rows from the checkpoint's Engram shards",
        )
    elif weights_path:
        found.update(path=weights_path, source="host.weights_path: the Engram rows are read from the weights")
    else:
        found["source"] = (
            f"neither {ENGRAM_DIR_ENV} nor container.model_path ({model_path}) is bound from the node, and the "
            "profile names no host.weights_path"
        )
    return found


def disk_paths(storage: Mapping[str, Any], weights_path: str | None) -> list[str]:
    """What node_facts must report the mount of (``disk_paths``) beyond the weights path it always reports."""
    path = storage.get("path")
    if not path or (weights_path and posixpath.normpath(path) == posixpath.normpath(weights_path)):
        return []
    return [path]


def _line(host: str, status: str, message: str) -> dict[str, str]:
    return {"check": CHECK, "host": host, "status": status, "message": message}


def _disk_text(disk: Mapping[str, Any]) -> str:
    parts = [str(disk.get("model"))] if disk.get("model") else []
    if disk.get("nvme"):
        parts.append(f"NVMe over {disk['transport']}" if disk.get("transport") else "NVMe, transport not reported")
    elif disk.get("rotational") is not None:
        parts.append("rotational" if disk.get("rotational") else "not rotational")
    if disk.get("removable"):
        parts.append("removable")
    return f"{disk.get('name')} ({', '.join(parts)})" if parts else str(disk.get("name"))


def judge(host: str, node: Mapping[str, Any], storage: Mapping[str, Any]) -> dict[str, str]:
    """``engram-nvme`` on one rank's node: PASS naming the NVMe device, FAIL naming the seed and what the path is on
    instead, WARN when it cannot be told, SKIP when the shape keeps the Engram tables in memory."""
    placement = storage.get("placement")
    if placement != "disk":
        return _line(
            host, SKIP, f"engram.placement is {placement or 'not set'}: the Engram tables are not read from disk"
        )
    path = storage.get("path")
    if not path:
        return _line(host, WARN, f"could not check where Engram on disk reads ({SEED}): {storage.get('source')}")
    mounts = (node.get("disk") or {}).get("mounts")
    facts = mounts.get(path) if isinstance(mounts, Mapping) else None
    if not isinstance(facts, Mapping):
        return _line(
            host,
            WARN,
            f"could not check {path} ({storage.get('source')}): node_facts gathered no mount for it (sections: "
            "[disk], with weights_path or disk_paths)",
        )
    where = f"{path} ({storage.get('source')})"
    on = f"{facts.get('fstype')} {facts.get('source')}, mounted on {facts.get('mount_point')}"
    if facts.get("error"):
        return _line(host, WARN, f"could not tell where {where} is stored: {facts['error']}")
    kind = facts.get("kind")
    if kind == "network":
        return _line(
            host,
            FAIL,
            f"{where} is on {on}: a network file system, so every Engram row a forward pass reads is a round trip "
            f"to another machine; {SEED}; {FIX}",
        )
    if kind == "memory":
        return _line(
            host,
            FAIL,
            f"{where} is on {on}: memory, the unified memory the KV cache and the weights share, which Engram on "
            f"disk exists to spare; {SEED}; {FIX}",
        )
    if kind == "overlay":
        return _line(
            host,
            FAIL,
            f"{where} is on {on}, an overlay without a local block device under it ({facts.get('via')}); {SEED}; {FIX}",
        )
    disks = [d for d in facts.get("disks") or [] if isinstance(d, Mapping)]
    if kind != "block" or not disks:
        return _line(
            host,
            WARN,
            f"could not tell the block device of {where}: {on} (device {facts.get('device') or 'not found'}); {SEED}",
        )
    wrong = []
    for disk in disks:
        if not disk.get("nvme"):
            wrong.append(f"{_disk_text(disk)} is not an NVMe SSD")
        elif disk.get("transport") and disk["transport"] not in LOCAL_TRANSPORTS:
            wrong.append(f"{_disk_text(disk)} is another machine's disk (NVMe over Fabrics), not a local one")
    device = facts.get("device")
    via = f", {facts['via']}" if facts.get("via") else ""
    if wrong:
        return _line(host, FAIL, f"{where} is on {on} (device {device}{via}): {'; '.join(wrong)}; {SEED}; {FIX}")
    names = ", ".join(_disk_text(d) for d in disks)
    return _line(host, PASS, f"{where} is on {on} (device {device}{via}): local NVMe {names}, as {SEED} wants")
