# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who a run is recorded as: one way to name them, never empty (issue 29: 'evidence by  (bench)')."""

from __future__ import annotations

import pathlib
import re

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.by import run_by, run_by_vars

ROOT = pathlib.Path(__file__).resolve().parents[4]


def test_the_awx_user_else_the_schedule_else_the_login_at_the_controller() -> None:
    assert run_by("alice", "nightly", "ops", "ctl") == "alice (AWX)"
    assert run_by("", "nightly", "ops", "ctl") == "AWX schedule nightly"
    assert run_by("", "", "ops", "ctl") == "ops@ctl"
    assert run_by_vars({"tower_user_name": "bob"}) == "bob (AWX)"
    assert run_by_vars({"awx_schedule_name": "recover check", "awx_user_name": ""}) == "AWX schedule recover check"


def test_without_user_in_the_environment_it_is_still_someone(monkeypatch) -> None:
    for name in ("USER", "LOGNAME", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    said = run_by()
    assert re.fullmatch(r"[^@\s]+@\S+", said) or re.fullmatch(r"uid \d+@\S+", said), said


def test_every_record_names_who_through_the_one_lookup() -> None:
    """No playbook builds 'by' from $USER or its own words: each record's by is the run_by lookup's (or, in the
    boot and promote.yml, the preflight's, which calls the same function)."""
    for path in sorted((ROOT / "playbooks").glob("*.yml")) + sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        text = path.read_text(encoding="utf-8")
        assert "'USER'" not in text, f"{path.name}: reads $USER for who runs; use lookup('dgxspark.cluster.run_by')"
        for line in re.findall(r"^\s+by: (.+)$", text, re.M):
            assert "run_by" in line or line.strip() in (
                '"{{ boot_write.by }}"',
                '"{{ promote_decision.by }}"',
                '"{{ window_by }}"',
            ), f"{path.name}: by: {line}"
