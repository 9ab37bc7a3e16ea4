# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory's names for a cluster, and how its values are read, shared by the plan and the fabric."""

from __future__ import annotations

from typing import Any

HEAD_GROUP = "dgxspark_head"
WORKERS_GROUP = "dgxspark_workers"
RANK_VAR = "dgxspark_rank"
ADDRESS_VAR = "dgxspark_fabric_address"
OVERRIDES_VAR = "dgxspark_overrides"
CABLING_VAR = "dgxspark_fabric_cabling"
# What the fabric role found on a host's ports (RDMA devices, interfaces, RoCE GID index), for NCCL.
FABRIC_NCCL_VAR = "fabric_nccl"


def as_rank(value: Any) -> int | None:
    """A rank from the inventory: an integer >= 0, or its digits as text (INI inventories); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None
