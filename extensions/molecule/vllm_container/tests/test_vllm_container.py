# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every rank runs as planned: the rank's container, read with the docker CLI on its node, against the plan that
side_effect.yml made again and kept (vllm_container_plan.json). sim3-worker2's container, which side_effect.yml
ran the role against with another plan, must still run untouched."""

from __future__ import annotations

import json

import pytest

testinfra_hosts = ["ansible://dgxspark"]

CONTAINER = "vllm_dsv41"
IMAGE = "dgxspark-sim/engine:latest"
GIB = 1024**3


@pytest.fixture(scope="module")
def rank(host, record):
    """This host's rank in the plan."""
    name = host.ansible.get_variables()["inventory_hostname"]
    ranks = [planned for planned in record("vllm_container_plan.json")["ranks"] if planned["host"] == name]
    assert ranks, f"the plan has no rank on {name}"
    return ranks[0]


@pytest.fixture(scope="module")
def container(host):
    return json.loads(host.check_output("docker inspect %s", CONTAINER))[0]


def test_runs_from_the_planned_image_untouched(container, rank):
    assert container["State"]["Running"], container["State"]
    assert container["Config"]["Image"] == rank["image"] == IMAGE


def test_carries_the_planned_spec_and_command(container, rank):
    labels = container["Config"]["Labels"]
    assert labels["dgxspark.cluster.spec_sha256"] == rank["spec_sha256"], labels
    assert container["Config"]["Cmd"] == rank["command"]


def test_has_the_planned_limits(container):
    config = container["HostConfig"]
    assert config["NetworkMode"] == "host"
    assert config["IpcMode"] == "host"
    assert config["RestartPolicy"]["Name"] == "no"
    assert config["Memory"] == 16 * GIB
    assert [limit["Hard"] for limit in config["Ulimits"] if limit["Name"] == "nofile"][:1] == [20000]
