# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sim4: the tp4 ring booted end to end on a fresh cluster, serving, stopped, then down with nothing left."""

from __future__ import annotations

import json
import subprocess

from simcluster import boot_serve_and_stop, node_links, simctl


def test_ring_is_cabled(sim4):
    """Node i's enp1s0f1np1 to node i+1's enp1s0f0np0, wrapping: four cables, each node on both ports."""
    hosts = [node["host"] for node in sim4["nodes"]]
    links = {host: node_links(host) for host in hosts}
    for i, host in enumerate(hosts):
        nxt = hosts[(i + 1) % len(hosts)]
        here, there = links[host]["enp1s0f1np1"], links[nxt]["enp1s0f0np0"]
        assert here["link_index"] == there["ifindex"] and there["link_index"] == here["ifindex"], (host, nxt)


def test_boot_serves_then_stop_leaves_no_rank(sim4):
    """boot.yml on the fresh ring (kernel, fabric, guard converged by the boot itself), the head's
    /v1/models and a completion from this machine, then stop.yml: every rank exited, the guard idle."""
    boot_serve_and_stop("sim4", sim4)


def test_down_leaves_nothing(sim4):
    proc = simctl("down", "sim4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert simctl("leftovers", "sim4").returncode == 0
    names = subprocess.run(
        ["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True, check=True
    ).stdout
    assert not [n for n in names.split() if n.startswith("sim4-")]
    host_links = json.loads(subprocess.run(["ip", "-j", "link"], capture_output=True, text=True, check=True).stdout)
    assert not [i["ifname"] for i in host_links if i["ifname"].startswith("dgxsim4-")]
