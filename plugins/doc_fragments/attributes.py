# Copyright: dgxspark.cluster maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Attributes several of the collection's modules and action plugins share. A plugin's own ``attributes`` entry
for the same attribute wins, key by key (Ansible merges a fragment's attributes under the plugin's)."""

from __future__ import annotations


class ModuleDocFragment:
    # dgxspark.cluster.attributes: no diff, for there is nothing changed to show
    DOCUMENTATION = r"""
attributes:
  diff_mode:
    support: none
    description: Changes nothing.
"""

    # dgxspark.cluster.attributes.read_only: the plugin never changes anything - check mode runs as usual, no diff
    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same under C(--check).
  diff_mode:
    support: none
    description: Changes nothing.
"""

    # dgxspark.cluster.attributes.controller: an action plugin that runs on the controller alone
    CONTROLLER = r"""
attributes:
  platform:
    support: full
    platforms: all
    description: Runs on the controller.
"""
