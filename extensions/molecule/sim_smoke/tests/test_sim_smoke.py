# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated nodes against their real state: dgxspark.cluster.node_facts, run through Ansible by testinfra
(host.ansible), agrees with what the simulator cabled, the ports the kernel has and the node's Docker engine."""

from __future__ import annotations

import json

import pytest

testinfra_hosts = ["ansible://dgxspark"]

CABLING = "/etc/dgxspark-sim/cabling.json"
ENGINE_IMAGE = "dgxspark-sim/engine:latest"


@pytest.fixture(scope="module")
def facts(host):
    """node_facts' ``node`` for this host (a real run: check mode off)."""
    arguments = json.dumps({"sections": ["memory", "kernel", "fabric", "docker"]})
    return host.ansible("dgxspark.cluster.node_facts", arguments, check=False)["node"]


def test_cabled_ports_present_and_up(host, facts):
    ports = json.loads(host.file(CABLING).content_string).get("ports", {})
    links = [link["ifname"] for link in json.loads(host.check_output("ip -j link show"))]
    interfaces = facts["fabric"]["interfaces"]
    for port, far in ports.items():
        missing = f"port {port} (cabled to {far['peer_host']} {far['peer_port']}) is missing or down"
        assert port in interfaces, missing
        assert interfaces[port]["present"], missing
        assert interfaces[port]["carrier"], missing
        assert port in links, missing


def test_docker_engine_answers_with_the_engine_image(host, facts):
    assert facts["docker"]["present"]
    assert ENGINE_IMAGE in [tag for image in facts["docker"]["images"] for tag in image.get("tags") or []]
    assert host.run("docker image inspect %s", ENGINE_IMAGE).rc == 0
    assert facts["memory"]["mem_available_bytes"] > 0
