# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sim4: the tp4 ring booted end to end on a fresh cluster, serving, stopped; a trip's stop-all under a flood from
a rank; then a fleet, sim3 and sim4 booted at once through AWX's workflow; then down with nothing left."""

from __future__ import annotations

import base64
import ipaddress
import json
import secrets
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from simcluster import (
    REPO,
    ansible_on,
    boot_serve_and_stop,
    ee_image,
    guard_phase,
    http_json,
    node_links,
    node_sh,
    rank_containers,
    runner_job,
    simctl,
    started_at,
)


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


RELEASES = "/var/lib/dgxspark-cluster/releases"
# A short benchmark: what promote.yml must run again for the candidate, read from the promoted release's run.
SHORT_BENCH = {
    "dgxspark_bench_levels": [1, 2],
    "dgxspark_bench_requests": 6,
    "dgxspark_bench_prompt_tokens": 64,
    "dgxspark_bench_max_tokens": 24,
    "dgxspark_bench_warmup": 1,
    "dgxspark_bench_bursts": [2],
    "dgxspark_bench_burst_max_tokens": 24,
    "dgxspark_bench_needle_tokens": 0,
}


def _release_files() -> dict[str, dict]:
    """The releases sim4's head keeps, by id."""
    listing = node_sh("sim4-head", f"ls {RELEASES} 2>/dev/null || true").stdout.split()
    return {
        name[: -len(".json")]: json.loads(node_sh("sim4-head", f"cat {RELEASES}/{name}").stdout)
        for name in listing
        if name.endswith(".json")
    }


def _guard_only_candidate(tmp_path: Path, grace: int) -> Path:
    """The shipped sim4 profile with the steady guard's grace changed: the host section alone."""
    profile = json.loads((REPO / "inventories" / "sim4" / "serving-profile.json").read_text())
    profile["host"]["memguard_grace_seconds"] = grace
    path = tmp_path / f"guard-grace-{grace}.json"
    path.write_text(json.dumps(profile, indent=2))
    return path


def _flat(proc: subprocess.CompletedProcess) -> str:
    return " ".join(proc.stdout.split())


def test_a_guard_only_change_makes_a_release(sim4, tmp_path):
    """Issue 27: a change of the profile's host section alone (the steady guard's grace) is a release. Booted
    plainly, the preflight refuses it (release FAIL, nothing recorded); as a candidate it is recorded, its ranks the
    promoted release's spec for spec and left running, its host section's hash another, and the guard on every node
    takes the new grace. The shipped profile booted twice records nothing new. Leaves the shipped profile's release
    promoted and the cluster stopped."""
    boot = ansible_on("sim4", "ansible-playbook", "playbooks/boot.yml")
    assert boot.returncode == 0, boot.stdout[-8000:]
    before = _release_files()
    [promoted] = [r for r in before.values() if r["state"] == "promoted"]
    try:
        again = ansible_on("sim4", "ansible-playbook", "playbooks/boot.yml")
        assert again.returncode == 0, again.stdout[-6000:]
        assert _release_files().keys() == before.keys()  # the same profile twice: no new release
        hosts = [node["host"] for node in sim4["nodes"]]
        started = {host: started_at(host) for host in hosts}
        changed = _guard_only_candidate(tmp_path, 31)
        refused = ansible_on("sim4", "ansible-playbook", "playbooks/boot.yml", "-e", f"dgxspark_profile={changed}")
        assert refused.returncode != 0
        assert "its ranks are the same, spec for spec, but its host section" in _flat(refused), refused.stdout[-6000:]
        assert _release_files().keys() == before.keys()
        candidate = ansible_on(
            "sim4",
            "ansible-playbook",
            "playbooks/boot.yml",
            "-e",
            f"dgxspark_profile={changed}",
            "-e",
            "boot_candidate=true",
        )
        assert candidate.returncode == 0, candidate.stdout[-8000:]
        assert "serves a CANDIDATE" in _flat(candidate) and "another host section" in _flat(candidate)
        records = _release_files()
        [new] = [r for ident, r in records.items() if ident not in before]
        assert new["state"] == "candidate" and records[promoted["id"]]["state"] == "promoted"
        assert new["spec_sha256"] == promoted["spec_sha256"]
        assert new.get("host_sha256") and new["host_sha256"] != promoted.get("host_sha256")
        assert {host: started_at(host) for host in hosts} == started  # no rank started anew
        for host in hosts:
            config = json.loads(node_sh(host, "cat /etc/dgxspark-memguard/config.json").stdout)
            assert config["phases"]["steady"]["grace_s"] == 31, (host, config["phases"])
    finally:
        _stop_and_promote(promoted["id"])


def _stop_and_promote(ident: str) -> None:
    """The cluster stopped and the shipped profile's release ``ident`` promoted again, for the tests after."""
    ansible_on("sim4", "ansible-playbook", "playbooks/stop.yml")
    again = ansible_on(
        "sim4", "ansible", "sim4-head", "-m", "dgxspark.cluster.release", "-a", f"operation=promote id={ident}"
    )
    assert again.returncode == 0, again.stdout[-2000:]


def test_a_promotion_reuses_the_promoted_runs_parameters(sim4, tmp_path):
    """Issue 27: promote.yml runs the candidate's benchmark with the promoted release's run's parameters, read from
    its results, none given; a value given that differs is refused before anything is touched, naming it. The
    candidate is a guard-only change (the same engine), so the comparison is between equals. Leaves the shipped
    profile's release promoted and the cluster stopped."""
    boot = ansible_on("sim4", "ansible-playbook", "playbooks/boot.yml")
    assert boot.returncode == 0, boot.stdout[-8000:]
    [promoted] = [r for r in _release_files().values() if r["state"] == "promoted"]
    try:
        bench = ansible_on("sim4", "ansible-playbook", "playbooks/bench.yml", "-e", json.dumps(SHORT_BENCH))
        assert bench.returncode == 0, bench.stdout[-6000:]
        stored = _release_files()[promoted["id"]]["evidence"]["bench"]["results"]
        baseline = json.loads(Path(stored).read_text())["identity"]["workload"]
        changed = _guard_only_candidate(tmp_path, 32)
        differs = ansible_on(
            "sim4",
            "ansible-playbook",
            "playbooks/promote.yml",
            "-e",
            f"dgxspark_candidate={changed}",
            "-e",
            "dgxspark_bench_requests=7",
        )
        assert differs.returncode != 0
        flat = _flat(differs)
        assert "dgxspark_bench_requests: given 7, the promoted run's 6" in flat, differs.stdout[-6000:]
        assert "dgxspark_promote_bench_override=true" in flat and "nothing was touched" in flat
        assert [r["state"] for r in _release_files().values()].count("candidate") == 0
        promote = ansible_on("sim4", "ansible-playbook", "playbooks/promote.yml", "-e", f"dgxspark_candidate={changed}")
        flat = _flat(promote)
        # (the YAML callback doubles an apostrophe in a quoted line: phrases without one)
        assert "benchmark takes the promoted release" in flat and "requests 6," in flat, promote.stdout[-8000:]
        [judged] = [r for r in _release_files().values() if "promotion" in (r.get("evidence") or {})]
        promotion = judged["evidence"]["promotion"]
        assert promotion["baseline"]["release"] == promoted["id"] and promotion["baseline"]["results"] == stored
        ran = json.loads(Path(promotion["candidate"]["results"]).read_text())["identity"]["workload"]
        for key in ("levels", "requests_per_level", "prompt_tokens", "max_tokens", "warmup_requests", "bursts"):
            assert ran[key] == baseline[key], (key, ran[key], baseline[key])
        assert ran["requests_per_level"] == 6 and ran["levels"] == [1, 2]  # not bench.yml's defaults (100; 1-8)
        assert promotion["verdict"] in ("pass", "inconclusive"), promotion["lines"]  # the same engine: no regression
        assert (promote.returncode == 0) is (promotion["verdict"] == "pass"), promote.stdout[-4000:]
    finally:
        _stop_and_promote(promoted["id"])


# A client in a rank's container (ranks run with --network=host: it speaks from its node's own address, a planned
# peer's) opening connections to the other guards as fast as it can, holding 64 to each, for 90 s.
FLOOD = """
import socket, threading, time
end = time.time() + 90
def flood(target):
    held = []
    while time.time() < end:
        try:
            held.append(socket.create_connection(target, timeout=1))
        except OSError:
            time.sleep(0.001)
        while len(held) > 64:
            held.pop(0).close()
for address in ADDRESSES:
    threading.Thread(target=flood, args=((address, 7391),)).start()
"""


def _guard_rejections(host: str) -> dict:
    return json.loads(node_sh(host, "cat /run/dgxspark-memguard/state.json").stdout)["peers"]["rejections"]


def test_a_flood_from_a_rank_does_not_keep_a_trip_from_stopping_every_rank(sim4):
    """Issue 26: a client at one planned peer's address kept the guards' 16 shared connection slots full and
    5 of 5 trips were lost, each sender reporting ok. Here a rank's container on worker1 floods every other
    guard; a trip on worker2 still stops every rank on every node, and worker2's trip says that every peer
    acknowledged its stop-all."""
    nodes = {node["host"]: node for node in sim4["nodes"]}
    flooder, tripper = "sim4-worker1", "sim4-worker2"
    boot = ansible_on("sim4", "ansible-playbook", "playbooks/boot.yml")
    assert boot.returncode == 0, boot.stdout[-8000:] + boot.stderr[-3000:]
    try:
        assert all(rank_containers(host) == {"vllm_dsv41": "running"} for host in nodes)
        targets = [n["management_address"] for host, n in nodes.items() if host != flooder]
        script = f"ADDRESSES = {targets!r}\n{FLOOD}"
        code = base64.b64encode(script.encode()).decode()
        node_sh(flooder, f"docker exec -d vllm_dsv41 python3 -c \"import base64; exec(base64.b64decode('{code}'))\"")
        flooded = nodes[flooder]["management_address"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the flood is on: the other guards refuse its connections past its slots
            seen = [_guard_rejections(host) for host in nodes if host != flooder]
            if all(r["total"] > 64 and (r["last"] or {}).get("from") == flooded for r in seen):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"the flood did not reach every guard: {seen}")
        node_sh(tripper, "dgxspark-memguard trip 'flood test (sim4)'")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            states = {host: rank_containers(host).get("vllm_dsv41") for host in nodes}
            if all(state != "running" for state in states.values()):
                break
            time.sleep(1)
        else:
            raise AssertionError(f"ranks still running after the trip on {tripper}: {states}")
        for host in nodes:
            tripped = guard_phase(host)["tripped"]
            assert tripped, host
            assert tripped["from_peer"] == (None if host == tripper else tripper), (host, tripped)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not guard_phase(tripper)["tripped"]["stop_all"]["done"]:
            time.sleep(1)
        stop_all = guard_phase(tripper)["tripped"]["stop_all"]
        assert stop_all["ok"] is True and stop_all["not_acknowledged"] == [], stop_all
        assert sorted(stop_all["acknowledged"]) == sorted(host for host in nodes if host != tripper)
    finally:
        for host in nodes:
            node_sh(host, "dgxspark-memguard clear", check=False)
        stop = ansible_on("sim4", "ansible-playbook", "playbooks/stop.yml")
    assert stop.returncode == 0, stop.stdout[-6000:] + stop.stderr[-3000:]


FLEET_BOOT = "dgxspark fleet boot"
BOOT_REPORT = "Say where the cluster serves, its state and a sample completion"


def _fleet_job(info: dict, template: str, path: Path, image: str, key: str, ident: str) -> runner_job.Job:
    """A fleet cluster's template launched as AWX launches it: its own inventory (fleet) and limit, the cluster's
    SSH key as its machine credential, the guards' key of that cluster as a credential's extra variable."""
    return runner_job.launch(
        template,
        None,
        Path(info["ssh_key"]),
        path,
        image=image,
        network=info["management_network"],
        extra_vars={"memguard_peer_key": key},
        ident=ident,
        timeout=1200,
    )


def _fabric_addresses(host: str) -> set[ipaddress.IPv4Address]:
    addresses = json.loads(node_sh(host, "ip -j -4 address show").stdout)
    found = {ipaddress.ip_address(a["local"]) for link in addresses for a in link.get("addr_info", [])}
    return {a for a in found if a in ipaddress.ip_network("10.99.0.0/16")}


def test_a_fleet_boots_both_clusters_at_once_through_awx_without_cross_talk(sim4, sim3, tmp_path):
    """inventories/fleet in AWX (awx/resources.yml): the workflow `dgxspark fleet boot` has a node per cluster and
    no link between them, so AWX starts both at once. Each node's job runs here as AWX launches it (ansible-runner
    in the EE, the fleet inventory, the template's limit, the cluster's own key), both at the same time. Each job
    acts on its own cluster's hosts only and both clusters serve; nothing crosses: every rank's master address is
    its own head's, the fabric addresses are each cluster's subnet, every guard knows only its own cluster's peers
    and key. Stopping one cluster (its own stop template) leaves the other serving. Leaves both stopped."""
    resources = runner_job.resources()
    [workflow] = [w for w in resources["workflow_job_templates"] if w["name"] == FLEET_BOOT]
    nodes = workflow["related"]["workflow_nodes"]
    templates = {node["limit"]: node["unified_job_template"]["name"] for node in nodes}
    assert templates == {"sim3": "dgxspark boot (fleet sim3)", "sim4": "dgxspark boot (fleet sim4)"}
    # no node waits on another: AWX runs them together
    assert not [n for n in nodes for kind in ("success_nodes", "failure_nodes", "always_nodes") if n["related"][kind]]
    clusters = {"sim3": sim3, "sim4": sim4}
    hosts = {name: [node["host"] for node in info["nodes"]] for name, info in clusters.items()}
    keys = {name: secrets.token_hex(16) for name in clusters}
    ident = {"sim3": "3", "sim4": "4"}  # AWX's job IDs (the runner's event callback reads them as integers)
    image = ee_image()
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            running = {
                name: pool.submit(
                    _fleet_job,
                    clusters[name],
                    templates[name],
                    tmp_path / f"boot-{name}",
                    image,
                    keys[name],
                    ident[name],
                )
                for name in clusters
            }
            jobs = {name: future.result() for name, future in running.items()}
        for name, job in jobs.items():
            assert (job.status, job.rc) == ("successful", 0), job.stdout()[-8000:]
            stats = job.stats()
            assert sorted(stats["processed"]) == sorted(hosts[name]) and not stats["failures"], stats
            (event,) = job.of("runner_on_ok", BOOT_REPORT)
            report = " ".join(" ".join(map(str, event["event_data"]["res"]["msg"])).split())
            head = clusters[name]["nodes"][0]["management_address"]
            assert f"endpoint: http://{head}:8000/v1 serving" in report, report
        for name, info in clusters.items():
            head = info["nodes"][0]
            subnet = ipaddress.ip_network(f"{head['fabric_address']}/24", strict=False)
            others = {h for other in clusters if other != name for h in hosts[other]}
            for node in info["nodes"]:
                host = node["host"]
                assert rank_containers(host) == {"vllm_dsv41": "running"}, host
                argv = json.loads(node_sh(host, "docker inspect --format '{{json .Args}}' vllm_dsv41").stdout)
                assert argv[argv.index("--master-addr") + 1] == head["fabric_address"], (host, argv)
                fabric = _fabric_addresses(host)
                assert fabric and all(address in subnet for address in fabric), (host, fabric)
                config = json.loads(node_sh(host, "cat /etc/dgxspark-memguard/config.json").stdout)
                assert config["peer_key"] == keys[name], host
                peers = {peer["host"] for peer in config["peers"]}
                assert peers == set(hosts[name]) - {host} and not peers & others, (host, peers)
                assert guard_phase(host)["phase"] == "steady", host
            assert http_json(f"http://{head['management_address']}:8000/v1/models")["data"], name
        # one cluster stopped by its own template: the other serves on
        stop = _fleet_job(sim3, "dgxspark stop (fleet sim3)", tmp_path / "stop-sim3", image, keys["sim3"], "30")
        assert (stop.status, stop.rc) == ("successful", 0), stop.stdout()[-6000:]
        assert sorted(stop.stats()["processed"]) == sorted(hosts["sim3"])
        assert all(rank_containers(host) == {} for host in hosts["sim3"])
        assert all(rank_containers(host) == {"vllm_dsv41": "running"} for host in hosts["sim4"])
        head4 = sim4["nodes"][0]["management_address"]
        model = json.loads((REPO / "inventories" / "sim4" / "serving-profile.json").read_text())["model"]
        done = http_json(
            f"http://{head4}:8000/v1/completions", {"model": model, "prompt": "Count from 1 to 5:", "max_tokens": 16}
        )
        assert done["choices"][0]["text"].strip() == "1, 2, 3, 4, 5", done
    finally:
        for name, info in clusters.items():
            _fleet_job(info, f"dgxspark stop (fleet {name})", tmp_path / f"final-stop-{name}", image, keys[name], "99")


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
