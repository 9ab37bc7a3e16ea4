# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sim8: eight nodes on the simulated switch (a Linux bridge), a TP8 boot that serves and stops, then down
with nothing left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from simcluster import REPO, ansible_on, boot_serve_and_stop, node_links, node_sh, simctl


def test_every_node_on_the_switch(sim8):
    switch = sim8["switch"]
    host_links = json.loads(
        subprocess.run(["ip", "-d", "-j", "link"], capture_output=True, text=True, check=True).stdout
    )
    ports = {i["ifname"]: i for i in host_links if i.get("master") == switch}
    assert len(ports) == 8, sorted(ports)
    for node in sim8["nodes"]:
        host = node["host"]
        links = node_links(host)
        assert sorted(n for n in links if n.startswith("enp")) == ["enp1s0f1np1"], f"{host}: {sorted(links)}"
        port = links["enp1s0f1np1"]
        assert "UP" in port["flags"] and port["mtu"] == 1500
        cabling = json.loads(node_sh(host, "cat /etc/dgxspark-sim/cabling.json").stdout)["ports"]["enp1s0f1np1"]
        assert cabling["peer_host"] == switch and cabling["via"] == "switch"
        switch_port = ports[cabling["peer_port"]]
        assert switch_port["link_index"] == port["ifindex"] and port["link_index"] == switch_port["ifindex"]
        assert switch_port["mtu"] == 9000  # the switch passes jumbo frames
        assert len(cabling["reaches"]) == 7


def test_the_switch_switches(sim8):
    head, last = sim8["nodes"][0]["host"], sim8["nodes"][-1]["host"]
    try:
        node_sh(head, "ip addr add 169.254.88.1/24 dev enp1s0f1np1")
        node_sh(last, "ip addr add 169.254.88.8/24 dev enp1s0f1np1")
        node_sh(head, "ping -c 2 -W 2 169.254.88.8")
    finally:
        node_sh(head, "ip addr flush dev enp1s0f1np1", check=False)
        node_sh(last, "ip addr flush dev enp1s0f1np1", check=False)


def test_boot_serves_then_stop_leaves_no_rank(sim8, tmp_path):
    """boot.yml with eight ranks (TP8 over the switch; the boot converges kernel, fabric and guard on the
    fresh nodes), the head's /v1/models and a completion from this machine, a short bench.yml sent from this
    machine (the controller) to the head, then stop.yml: no rank runs."""

    def bench() -> None:
        extra = {
            "dgxspark_bench_client": "localhost",
            "dgxspark_bench_levels": [1, 8],
            "dgxspark_bench_requests": 8,
            "dgxspark_bench_max_tokens": 16,
            "dgxspark_bench_warmup": 0,
            "dgxspark_bench_needle_tokens": 0,
            "dgxspark_bench_label": f"test{os.getpid()}",
        }
        proc = ansible_on("sim8", "ansible-playbook", "playbooks/bench.yml", "-e", json.dumps(extra))
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
        assert "bench: level 2/2: 8 ok, 0 failed" in proc.stdout, proc.stdout[-4000:]
        # the default folder is inside the inventory, hidden: Ansible does not read it as an inventory source
        (run,) = (REPO / "inventories" / "sim8" / ".bench").glob(f"*-test{os.getpid()}")
        shutil.move(run, tmp_path / run.name)
        run = tmp_path / run.name
        inventory = ansible_on("sim8", "ansible-inventory", "--list")
        assert inventory.returncode == 0 and "Unable to parse" not in inventory.stderr, inventory.stderr
        results = json.loads((run / "results.json").read_text())
        identity = results["identity"]
        assert identity["shape"] == "tp8-300k" and identity["client_host"] == "localhost"
        assert identity["endpoint"] == f"http://{sim8['nodes'][0]['management_address']}:8000"
        assert sorted(identity["hosts"]) == sorted(node["host"] for node in sim8["nodes"])
        assert len(set(identity["image_ids"].values())) == 1
        # the stand-in's tp8-300k table (seed 002, 7.1): c=1 TTFT 213.19 ms, ITL 26.67 ms
        first = sorted(results["levels"][0]["requests"], key=lambda r: r["ttft"])
        assert 0.2132 <= first[4]["ttft"] < 0.2132 * 1.15, first[4]
        tpots = sorted((r["e2e"] - r["ttft"]) / 15 for r in first)
        assert 0.02667 * 0.97 <= tpots[4] < 0.02667 * 1.05, tpots

    boot_serve_and_stop("sim8", sim8, while_serving=bench)


def test_down_leaves_nothing(sim8):
    proc = simctl("down", "sim8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert simctl("leftovers", "sim8").returncode == 0
    host_links = json.loads(subprocess.run(["ip", "-j", "link"], capture_output=True, text=True, check=True).stdout)
    assert not [i["ifname"] for i in host_links if i["ifname"].startswith("dgxsim8-")]
    rules = subprocess.run(["iptables", "-S", "DOCKER-USER"], capture_output=True, text=True, check=True).stdout
    assert "dgxsim8" not in rules
