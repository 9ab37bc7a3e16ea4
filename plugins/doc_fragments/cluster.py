# Copyright: dgxspark.cluster maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options several of the collection's plugins share: the cluster's inventory groups and its profile."""

from __future__ import annotations


class ModuleDocFragment:
    # dgxspark.cluster.cluster: the inventory groups of the head and the workers
    # (serving_profile, fabric_plan, boot_preflight).
    DOCUMENTATION = r"""
options:
  cluster_groups:
    description:
      - The inventory groups of the cluster's head and workers - the value of the variable C(dgxspark_cluster_groups),
        as the lookup P(dgxspark.cluster.cluster_groups#lookup) gives it to a task (the roles and playbooks of the
        collection pass it so).
      - A key left out takes the collection's default, C(dgxspark_head) and C(dgxspark_workers).
    type: dict
    default: {}
    suboptions:
      head:
        description: Inventory group holding the head (rank 0).
        type: str
        default: dgxspark_head
      workers:
        description: Inventory group holding the workers (ranks 1..N-1).
        type: str
        default: dgxspark_workers
"""

    # dgxspark.cluster.cluster.profile: the serving profile and the shape chosen from it
    # (serving_profile, fabric_plan).
    PROFILE = r"""
options:
  src:
    description: Path of the serving profile (JSON, schema_version 2).
    type: path
    required: true
  shape:
    description: The shape to plan for. Defaults to the profile's C(default_shape).
    type: str
"""
