# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._systemctl import parse_show, show_argv
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import GB10

UNITS = ["ollama.service", "nv-cpu-governor.service", "open-webui.service"]


def test_argv() -> None:
    assert show_argv("/usr/bin/systemctl", UNITS[:2]) == [
        "/usr/bin/systemctl",
        "show",
        "--no-pager",
        "--property=Id,LoadState,ActiveState,SubState,UnitFileState,Result,NRestarts",
        "--",
        "ollama.service",
        "nv-cpu-governor.service",
    ]


def test_three_units_of_the_gb10_fixture() -> None:
    units = parse_show((GB10 / "tools" / "systemctl-show.txt").read_text(), UNITS)
    assert units == {
        "ollama.service": {
            "id": "ollama.service",
            "load_state": "loaded",
            "active_state": "active",
            "sub_state": "running",
            "unit_file_state": "enabled",
            "result": "success",
            "restarts": "0",
        },
        "nv-cpu-governor.service": {
            "id": "nv-cpu-governor.service",
            "load_state": "loaded",
            "active_state": "inactive",
            "sub_state": "dead",
            "unit_file_state": "enabled",
            "result": "success",
            "restarts": "0",
        },
        "open-webui.service": {
            "id": "open-webui.service",
            "load_state": "not-found",
            "active_state": "inactive",
            "sub_state": "dead",
            "unit_file_state": None,
            "result": "success",
            "restarts": "0",
        },
    }


def test_a_guard_that_gave_up_restarting() -> None:
    """A unit that hit its start limit: failed, with why and how often systemd restarted it."""
    text = (
        "Id=dgxspark-memguard.service\nLoadState=loaded\nActiveState=failed\nSubState=failed\n"
        "UnitFileState=enabled\nResult=start-limit-hit\nNRestarts=5\n"
    )
    unit = parse_show(text, ["dgxspark-memguard.service"])["dgxspark-memguard.service"]
    assert (unit["active_state"], unit["result"], unit["restarts"]) == ("failed", "start-limit-hit", "5")


@pytest.mark.parametrize(
    "text,units,expected",
    [
        # one unit: no blank line at all; properties in any order; unknown properties ignored
        (
            "ActiveState=active\nId=a.service\nSubState=running\nExtra=1\n",
            ["a.service"],
            {
                "a.service": {
                    "id": "a.service",
                    "active_state": "active",
                    "sub_state": "running",
                    "load_state": None,
                    "unit_file_state": None,
                    "result": None,
                    "restarts": None,
                }
            },
        ),
        # an alias is reported under the name asked for, its Id says what it resolves to
        (
            "Id=docker.service\nLoadState=loaded\n\n\nId=x.timer\nLoadState=loaded\n\n",
            ["dockerd-alias.service", "x.timer"],
            {
                "dockerd-alias.service": {
                    "id": "docker.service",
                    "load_state": "loaded",
                    "active_state": None,
                    "sub_state": None,
                    "unit_file_state": None,
                    "result": None,
                    "restarts": None,
                },
                "x.timer": {
                    "id": "x.timer",
                    "load_state": "loaded",
                    "active_state": None,
                    "sub_state": None,
                    "unit_file_state": None,
                    "result": None,
                    "restarts": None,
                },
            },
        ),
    ],
)
def test_blocks(text: str, units: list[str], expected: dict[str, dict[str, str | None]]) -> None:
    assert parse_show(text, units) == expected


@pytest.mark.parametrize(
    "text,units,message",
    [
        ("Id=a.service\n", ["a.service", "b.service"], "asked about 2 unit"),
        ("", ["a.service"], "answered for 0"),
        ("Id=a.service\nnonsense\n", ["a.service"], "not a Key=value line"),
    ],
)
def test_rejects(text: str, units: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_show(text, units)
