# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric on every simulated node, read with iproute2, networkctl, sysctl and iputils (not with the role's own
module) and held against what the simulator cabled (/etc/dgxspark-sim/cabling.json) and what the inventory says
the fabric must be. The fabric_cut scenario runs these too, after its cable was mended."""

from __future__ import annotations

import json

import pytest

testinfra_hosts = ["ansible://dgxspark"]

CABLING = "/etc/dgxspark-sim/cabling.json"
MTU = 9000
# the largest ICMP payload that fits one frame unfragmented (IPv4 header 20 + ICMP header 8)
PAYLOAD = MTU - 28
NETWORKD_DIR = "/etc/systemd/network"


@pytest.fixture(scope="module")
def ports(host):
    """The node's cabled ports, as the simulator wrote them."""
    return sorted(json.loads(host.file(CABLING).content_string)["ports"])


@pytest.fixture(scope="module")
def peers(host, inventory):
    """Every other rank's fabric address, in the inventory's order of names."""
    name = host.ansible.get_variables()["inventory_hostname"]
    return [
        (peer, inventory["hostvars"][peer]["dgxspark_fabric_address"])
        for peer in inventory["groups"]["dgxspark"]
        if peer != name
    ]


def test_cabled_ports_up_with_mtu_and_address(host, ports):
    address = host.ansible.get_variables()["dgxspark_fabric_address"]
    links = {link["ifname"]: link for link in json.loads(host.check_output("ip -j addr show"))}
    assert ports
    for port in ports:
        assert port in links, f"{port} is not among the node's interfaces"
        link = links[port]
        assert link["mtu"] == MTU, f"{port}: {link}"
        assert "UP" in link["flags"], f"{port}: {link}"
        inet = [info["local"] for info in link.get("addr_info", []) if info.get("family") == "inet"]
        assert address in inet, f"{port}: {link}"


def test_configuration_persists_as_networkd_files(host, ports):
    networkd = host.service("systemd-networkd")
    assert networkd.is_running
    assert networkd.is_enabled
    listed = host.check_output("networkctl list --no-legend --no-pager").splitlines()
    configured = {line.split()[1] for line in listed if " configured" in line}
    assert set(ports) <= configured, listed
    for port in ports:
        network = host.file(f"{NETWORKD_DIR}/10-dgxspark-fabric-{port}.network")
        assert network.is_file
        assert (network.user, network.group, network.mode) == ("root", "root", 0o644)
        lines = network.content_string.splitlines()
        assert f"Name={port}" in lines
        assert f"MTUBytes={MTU}" in lines


def test_loose_reverse_path_filtering_on_cabled_ports(host, ports):
    for port in ports:
        assert host.sysctl(f"net.ipv4.conf.{port}.rp_filter") == 2, port


def test_every_other_rank_answers_a_full_frame(host, peers):
    unanswered = []
    for peer, address in peers:
        ping = host.run("ping -n -q -M do -s %s -c 1 -W 2 %s", str(PAYLOAD), address)
        if ping.rc != 0:
            unanswered.append(f"{peer} ({address}): {ping.stdout.strip()} {ping.stderr.strip()}")
    assert not unanswered


def test_one_byte_over_the_mtu_does_not_pass(host, peers):
    peer, address = peers[0]
    ping = host.run("ping -n -q -M do -s %s -c 1 -W 1 %s", str(PAYLOAD + 1), address)
    assert ping.rc != 0, f"a {PAYLOAD + 1}-byte payload reached {peer} ({address}) unfragmented"
