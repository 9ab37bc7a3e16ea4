# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/status.yml on sim3 (issue 29): a serving cluster is OK (exit 0), a rank stopped and a guard tripped
are degraded (exit non-zero), each with its JSON document; and a status writes nothing, with --check or not.

The tests share one sim3 (conftest.sim3) and run in file order; the module takes sim3 down at its end.
"""

from __future__ import annotations

import json
import time

from simcluster import REPO, ansible_on, guard_phase, node_sh, rank_containers

HOSTS = ("sim3-head", "sim3-worker1", "sim3-worker2")
JSON_TASK = (
    "Say the status (as one JSON document with status_format=json); fail when degraded, so that a schedule alerts"
)
# where the collection and this playbook's modules could write on a node (the guard's own state, the engines' logs
# and Docker's files are the running services', not the status's)
WATCHED = (
    "/etc /var/lib/dgxspark-cluster /var/log/dgxspark-cluster /var/cache /var/lib/dgxspark-memguard /root /opt /usr"
)


def playbook(*args: str, env: dict | None = None):
    return ansible_on("sim3", "ansible-playbook", *args, env=env)


def status(*args: str):
    """status.yml as text (the default callback)."""
    return playbook("playbooks/status.yml", *args, env={"ANSIBLE_NOCOLOR": "1"})


def status_json(*args: str) -> tuple[int, dict]:
    """status.yml with -e status_format=json under the json callback: its exit code and the status document (the
    msg of its JSON task, on the head)."""
    proc = playbook(
        "playbooks/status.yml", "-e", "status_format=json", *args, env={"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"}
    )
    run = json.loads(proc.stdout)
    [task] = [t for play in run["plays"] for t in play["tasks"] if t["task"]["name"] == JSON_TASK]
    return proc.returncode, task["hosts"]["sim3-head"]["msg"]


def test_a_serving_cluster_is_ok_and_a_status_writes_nothing(sim3):
    booted = playbook("playbooks/boot.yml")
    assert booted.returncode == 0, booted.stdout[-6000:]
    stamp = {host: node_sh(host, "touch /tmp/status-stamp && sleep 1 && echo ok").stdout for host in HOSTS}
    bench_dir = REPO / "inventories" / "sim3" / ".bench"
    before = sorted(p.name for p in bench_dir.rglob("*")) if bench_dir.exists() else None

    text = status("-e", "status_logs=2", "-e", "status_smoke=true")
    assert text.returncode == 0, text.stdout[-6000:]
    flat = " ".join(text.stdout.split())
    assert "status: OK - 3 nodes, head sim3-head" in flat, flat[-4000:]
    assert "release: " in flat and "(promoted)" in flat
    for host in HOSTS:
        assert f"{host}: rank {HOSTS.index(host)} vllm_dsv41 running" in flat
    assert "| " in text.stdout  # the ranks' last log lines
    assert "answers, models" in flat and "smoke ok" in flat
    assert "memory guards:" in flat and "steady, not tripped" in flat and "lowest since the boot" in flat
    assert "no GPU (nvidia-smi not found)" in flat  # the simulated nodes have none
    checked = status("--check")
    assert checked.returncode == 0, checked.stdout[-4000:]
    recap = checked.stdout[checked.stdout.rindex("PLAY RECAP") :]
    assert recap.count("changed=0") == 3, recap

    rc, doc = status_json()
    assert rc == 0 and doc["ok"] is True and doc["degraded"] == [], doc
    assert doc["format"] == "dgxspark.cluster/status/1"
    assert [r["host"] for r in doc["ranks"]] == list(HOSTS) and all(r["running"] for r in doc["ranks"])
    assert all(r["uptime_s"] > 0 and r["restarts"] == 0 for r in doc["ranks"])
    assert doc["api"]["answered"] and doc["api"]["models"]
    assert doc["release"]["serves"] is True and doc["release"]["state"] == "promoted"
    for guard in doc["guards"]:
        assert guard["phase"] == "steady" and guard["tripped"] is None, guard
        assert guard["mem_available_bytes"] > 0 and guard["mem_available_min_bytes"] > 0
        assert guard["last_decision"]["decision"] == "phase"
    # the weights' disk: its free space where the profile names a weights path; sim3's profile names none today,
    # and then the status says so rather than reporting some other disk
    weights_path = json.loads((REPO / "inventories" / "sim3" / "serving-profile.json").read_text())["host"].get(
        "weights_path"
    )
    assert [d["host"] for d in doc["disks"]] == list(HOSTS)
    for disk in doc["disks"]:
        if weights_path:
            assert disk["path"] == weights_path and disk["available_bytes"] > 0, disk
        else:
            assert disk["path"] is None and disk["available_bytes"] is None, disk
    if not weights_path:
        assert flat.count("none named (the profile has no host.weights_path)") == 3, flat[-4000:]

    # nothing written: no file on the nodes newer than the stamp where a status could write, nothing on the
    # controller's benchmark folder
    for host in HOSTS:
        assert stamp[host].strip() == "ok"
        newer = node_sh(host, f"find {WATCHED} -xdev -type f -newer /tmp/status-stamp 2>/dev/null", check=False)
        assert newer.stdout.strip() == "", f"{host} wrote: {newer.stdout}"
    assert (sorted(p.name for p in bench_dir.rglob("*")) if bench_dir.exists() else None) == before


def test_a_rank_stopped_then_a_guard_tripped_are_degraded(sim3):
    try:
        node_sh("sim3-worker1", "docker stop -t 1 vllm_dsv41")
        assert rank_containers("sim3-worker1") == {"vllm_dsv41": "exited"}
        text = status()
        assert text.returncode != 0
        flat = " ".join(text.stdout.split())
        assert "status: DEGRADED" in flat and "sim3-worker1: rank 1 (vllm_dsv41) is exited" in flat, flat[-4000:]
        rc, doc = status_json()
        assert rc != 0 and doc["ok"] is False
        assert any(r.startswith("sim3-worker1: rank 1 (vllm_dsv41) is exited") for r in doc["degraded"]), doc
        assert [r["running"] for r in doc["ranks"]] == [True, False, True]

        node_sh("sim3-worker2", "dgxspark-memguard trip 'a trip by hand (status test)'")
        deadline = time.monotonic() + 30
        while not guard_phase("sim3-worker2").get("tripped"):
            assert time.monotonic() < deadline, "the guard did not trip"
            time.sleep(0.5)
        rc, doc = status_json()
        assert rc != 0
        tripped = [r for r in doc["degraded"] if "memory guard tripped" in r]
        assert any(r.startswith("sim3-worker2: memory guard tripped at") and "status test" in r for r in tripped), doc
        worker2 = next(g for g in doc["guards"] if g["host"] == "sim3-worker2")
        assert worker2["tripped"]["reason"] == "by hand: a trip by hand (status test)"  # the guard says who
        assert worker2["last_decision"]["decision"] in ("trip", "stop-all")
        text = status()
        assert text.returncode != 0 and "TRIPPED at" in text.stdout
    finally:
        # the stopped rank and the ones the trip stopped are left exited with the planned spec: replaced
        cleared = playbook("playbooks/boot.yml", "-e", "boot_clear_trip=true", "-e", "boot_replace=true")
        assert cleared.returncode == 0, cleared.stdout[-6000:]
        assert playbook("playbooks/stop.yml").returncode == 0
