# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot's check-mode lines: a boot asked to replace the ranks (window.yml's restore, rollback) never says it
would change nothing (issue 29: window.yml --check ended with "a boot would change nothing")."""

from __future__ import annotations

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.boot import would_do

PLAN = {
    "container_name": "vllm_dsv41",
    "ranks": [
        {"rank": 0, "host": "h0", "image": "img:1", "spec_sha256": "a" * 64},
        {"rank": 1, "host": "h1", "image": "img:1", "spec_sha256": "b" * 64},
    ],
}
SERVING = {"h0": True, "h1": True}


def test_a_cluster_serving_as_planned_changes_nothing_unless_replaced() -> None:
    plain = would_do(PLAN, {}, {}, SERVING, {})
    assert "rank 0 (h0): already serves as planned: left alone" in plain
    assert "a boot would change nothing" in plain[-1]
    replaced = would_do(PLAN, {}, {}, SERVING, {}, replace=True)
    assert (
        "rank 0 (h0): serves as planned, would be replaced (boot_replace) by vllm_dsv41 (img:1, spec aaaaaaaaaaaa)"
        in replaced
    )
    assert "would change nothing" not in replaced[-1]
    assert replaced[-1].startswith("check mode: the plan and the preflight passed.")
